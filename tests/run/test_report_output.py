"""`tpaudit report -o FILE` takes the format from FILE's suffix (.json,
.html/.htm, .xml for JUnit, anything else text) unless --format is given,
and JUnit suites are named by program and rank, the same on every run.
Needs TPAUDIT_BUILD."""
import json
import re
import sqlite3
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

BUILD = Path(os.environ["TPAUDIT_BUILD"])
SRC = Path(__file__).resolve().parents[2]
TPAUDIT = str(BUILD / "bin" / "tpaudit")
FINETUNE = SRC / "examples" / "finetune.py"


def tpaudit(*args, **kw):
    return subprocess.run([TPAUDIT, *map(str, args)], capture_output=True, text=True, timeout=300, **kw)


def seed_run(out):
    r = tpaudit("run", "-o", out, "--", sys.executable, FINETUNE, "--order", "buggy", "--steps", "2",
                "--device", "cpu", env=dict(os.environ, TPAUDIT_AUDIT="1,2"))
    assert r.returncode == 0, r.stderr
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("seed")
    return seed_run(tmp / "one"), seed_run(tmp / "two")


def kind_of(text):
    if text.startswith("<?xml"):
        return "junit"
    if text.lstrip().startswith("<!DOCTYPE html"):
        return "html"
    if text.startswith("{"):
        json.loads(text)
        return "json"
    assert text.startswith("tpaudit report:"), text[:80]
    return "text"


@pytest.mark.parametrize("name,kind", [("report.html", "html"), ("REPORT.HTM", "html"), ("report.json", "json"),
                                       ("junit.xml", "junit"), ("report.txt", "text"), ("report", "text"),
                                       ("report.md", "text"), (".json", "text")])
def test_format_from_the_suffix(runs, tmp_path, name, kind):
    path = tmp_path / name
    r = tpaudit("report", "-o", path, runs[0])
    assert r.returncode == 0, r.stderr
    assert kind_of(path.read_text()) == kind


@pytest.mark.parametrize("flag", ["--format", "-f"])
def test_format_option_wins_over_the_suffix(runs, tmp_path, flag):
    path = tmp_path / "report.html"
    assert tpaudit("report", flag, "text", "-o", path, runs[0]).returncode == 0
    assert kind_of(path.read_text()) == "text"
    path = tmp_path / "out.txt"
    assert tpaudit("report", "-o", path, flag, "json", runs[0]).returncode == 0
    assert kind_of(path.read_text()) == "json"


def test_stdout_is_text_by_default(runs):
    r = tpaudit("report", runs[0])
    assert r.returncode == 0 and kind_of(r.stdout) == "text"


def test_bad_format_is_still_refused(runs, tmp_path):
    r = tpaudit("report", "--format", "pdf", "-o", tmp_path / "r.pdf", runs[0])
    assert r.returncode == 2
    assert r.stderr.startswith("tpaudit: unknown format 'pdf'") and r.stderr.count("\n") == 1
    assert not (tmp_path / "r.pdf").exists()


def suites(path):
    root = ET.fromstring(tpaudit("report", "--format", "junit", path).stdout)
    return [(s.get("name"), [c.get("classname") for c in s.iter("testcase")]) for s in root.iter("testsuite")]


def test_junit_suites_are_named_by_program_not_pid(runs):
    one, two = suites(runs[0]), suites(runs[1])
    assert one == two, "suite names differ between two runs of the same program"
    names = [n for n, _ in one]
    assert names == ["tpaudit.finetune"], names
    assert all(c == "tpaudit.finetune" for _, cases in one for c in cases)


# ---- stacks in the text report ------------------------------------------------

def stacks(text):
    """{title: [lines]} of the first finding's stacks in the text report."""
    out, title = {}, None
    for line in text.split("\ndetails:\n", 1)[1].splitlines():
        if line.startswith("  [") and out:
            break
        if line.startswith("      ") and line.endswith("(most recent call last):"):
            title = line.strip().split(" (")[0]
            out[title] = []
        elif line.startswith("        ") and title:
            out[title].append(line.strip())
        else:
            title = None
    return out


def test_text_stacks_read_like_a_python_traceback(runs):
    text = tpaudit("report", runs[0]).stdout
    assert "site-packages" not in text and str(SRC) not in text
    st = stacks(text)
    assert set(st) >= {"created at", "replaced at"}, text
    created, replaced = st["created at"], st["replaced at"]
    # outermost first: the script's module level, then main, then the call that made the tensor
    assert created[0] == f"finetune.py:{line_of('main()')} in <module>", created
    assert created[1].endswith(" in main") and created[2].endswith(" in __init__"), created
    # then torch's frames under it: the innermost one in full, where a traceback ends (here two frames,
    # too few to fold; the fold of longer stretches is the next test's)
    assert created[3:] and all(l.startswith("torch/") for l in created[3:]), created
    assert created[-1].startswith("torch/nn/modules/module.py:") and created[-1].endswith(" in __setattr__"), created
    assert replaced[0].endswith(" in <module>") and replaced[-1].endswith(" in pad_vocab"), replaced


def line_of(text):
    return next(i for i, l in enumerate(FINETUNE.read_text().splitlines(), 1) if l.strip() == text)


APPLY_SCRIPT = '''
import torch
from torch import nn


def widen(module):
    if isinstance(module, nn.Linear) and module.out_features == 8:
        module.weight = nn.Parameter(torch.zeros(8, 4))


def main():
    model = nn.Sequential(nn.Sequential(nn.Linear(4, 8), nn.ReLU()), nn.Linear(8, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    model.apply(widen)
    model(torch.ones(1, 4)).sum().backward()
    opt.step()


main()
'''


def test_library_frames_between_user_frames_are_folded(tmp_path):
    """The callback given to torch's Module.apply: the user's frames in full,
    torch's recursion between them folded, paths relative to the run's cwd."""
    project = tmp_path / "project"
    (project / "train").mkdir(parents=True)
    (project / "train" / "apply_run.py").write_text(APPLY_SCRIPT)
    out = tmp_path / "out"
    r = tpaudit("run", "-o", out, "--", sys.executable, "train/apply_run.py", cwd=project,
                env=dict(os.environ, TPAUDIT_AUDIT="1"))
    assert r.returncode == 0, r.stderr
    text = tpaudit("report", out).stdout
    replaced = stacks(text)["replaced at"]
    lines = APPLY_SCRIPT.splitlines()
    at = {text: lines.index(text) + 1 for text in ("main()", "    model.apply(widen)",
                                                    "        module.weight = nn.Parameter(torch.zeros(8, 4))")}
    assert replaced[0] == f"train/apply_run.py:{at['main()']} in <module>", replaced
    assert replaced[1] == f"train/apply_run.py:{at['    model.apply(widen)']} in main", replaced
    assert re.fullmatch(r"\.\.\. \d+ frames in torch", replaced[2]), replaced
    # the user's callback, then the one torch frame that set the attribute (a single frame is shown in full)
    assert replaced[3] == f"train/apply_run.py:{at['        module.weight = nn.Parameter(torch.zeros(8, 4))']} in widen"
    assert replaced[4:] and all(l.startswith("torch/") for l in replaced[4:]), replaced
    assert str(project) not in text and "site-packages" not in text


# A framework in site-packages whose policy replaces a layer through torch's
# Module.apply, three calls below the user's `boost`, as ColossalAI's GPT-2
# policy resizes the embedding through transformers.
FRAMEWORK = {
    "fakefw/__init__.py": "from .booster import boost\n",
    "fakefw/booster.py": "from .plugin import configure\n\n\ndef boost(model):\n    return configure(model)\n",
    "fakefw/plugin.py": "from .policies.gpt2 import preprocess\n\n\ndef configure(model):\n    return preprocess(model)\n",
    "fakefw/policies/__init__.py": "",
    "fakefw/policies/gpt2.py": """import torch
from torch import nn


def widen(module):
    if isinstance(module, nn.Linear) and module.out_features == 8:
        module.weight = nn.Parameter(torch.zeros(8, 4))


def preprocess(model):
    model.apply(widen)
    return model
""",
}
BOOST_SCRIPT = '''
import fakefw
import torch
from torch import nn


def main():
    model = nn.Sequential(nn.Sequential(nn.Linear(4, 8), nn.ReLU()), nn.Linear(8, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    model = fakefw.boost(model)
    model(torch.ones(1, 4)).sum().backward()
    opt.step()


main()
'''


def test_the_framework_frame_that_made_the_call_is_shown(tmp_path):
    """A replacement made inside a framework: the user's lines first, the
    framework's own stretch folded up to the frame that called into torch
    (the policy's preprocess, shown in full), then torch's frames folded,
    and the innermost frame; the HTML shows the same frame with the user's."""
    site = tmp_path / "venv" / "lib" / "site-packages"
    for name, text in FRAMEWORK.items():
        (site / name).parent.mkdir(parents=True, exist_ok=True)
        (site / name).write_text(text)
    project = tmp_path / "project"
    project.mkdir()
    (project / "boost_run.py").write_text(BOOST_SCRIPT)
    out = tmp_path / "out"
    env = dict(os.environ, TPAUDIT_AUDIT="1", PYTHONPATH=os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])))
    r = tpaudit("run", "-o", out, "--", sys.executable, "boost_run.py", cwd=project, env=env)
    assert r.returncode == 0, r.stderr
    policy = FRAMEWORK["fakefw/policies/gpt2.py"].splitlines()
    at = {t: policy.index(t) + 1 for t in ("    model.apply(widen)", "        module.weight = nn.Parameter(torch.zeros(8, 4))")}
    script = BOOST_SCRIPT.splitlines()
    replaced = stacks(tpaudit("report", out).stdout)["replaced at"]
    assert replaced[:4] == [f"boost_run.py:{script.index('main()') + 1} in <module>",
                            f"boost_run.py:{script.index('    model = fakefw.boost(model)') + 1} in main",
                            "... 2 frames in fakefw",
                            f"fakefw/policies/gpt2.py:{at['    model.apply(widen)']} in preprocess",
                            ], replaced
    assert re.fullmatch(r"\.\.\. \d+ frames in torch", replaced[4]), replaced
    assert replaced[5] == f"fakefw/policies/gpt2.py:{at['        module.weight = nn.Parameter(torch.zeros(8, 4))']} in widen"
    html = tpaudit("report", "--format", "html", out).stdout
    shown = html.split('<ol class="frames">', 1)[1].split("</ol>", 1)[0]  # the first stack's unfolded frames
    assert "fakefw/policies/gpt2.py:%d</code> in <b>preprocess" % at["    model.apply(widen)"] in shown, shown
    assert "boost_run.py" in shown and "fakefw/booster.py" not in shown and "fakefw/plugin.py" not in shown


@pytest.mark.parametrize("argv,rank,suite", [
    (["python", "-X", "dev", "train.py", "--lr", "1"], 0, "tpaudit.train.rank0"),
    (["/usr/bin/python3", "-u", "/srv/jobs/finetune.py"], 3, "tpaudit.finetune.rank3"),
    (["/venv/bin/python3", "-m", "torch.distributed.run", "--nproc_per_node", "2", "t.py"], None,
     "tpaudit.torch.distributed.run"),
    (["/venv/bin/python", "/venv/bin/torchrun", "t.py"], None, "tpaudit.torchrun"),
    (["./my prog!<x>"], None, "tpaudit.my_prog__x_"),
    (["python", "-c", "print(1)"], None, "tpaudit.python"),
])
def test_junit_program_names(tmp_path, argv, rank, suite):
    sys.path.insert(0, str(SRC / "tests" / "analyzer"))
    import hostile_db
    db = hostile_db.seed(tmp_path / "one.db")
    with sqlite3.connect(db) as c:
        c.execute("UPDATE run SET argv=?, rank=?", (json.dumps(argv), rank))
        c.execute("UPDATE audit SET rank=?", (rank,))
    root = ET.fromstring(tpaudit("report", "-o", "/dev/stdout", "--format", "junit", db).stdout)
    assert [s.get("name") for s in root.iter("testsuite")] == [suite]
