"""Each part of the probe turns off alone (python/tpaudit/_parts.py).

One part is broken on purpose per case: a sitecustomize the test puts on
PYTHONPATH (it runs after the probe's bootstrap, before the program imports
torch) replaces the function the part calls with one that raises, as a
torch API gone missing would.  Under `tpaudit run`, the program leaks
(`kept`) and keeps a replaced head in its optimizer.  Every case checks:
- one `tpaudit:` line names the part and what is lost;
- the run's python field lists the part off (and the verdicts it blocks);
- the stale head is still found, at every audit point;
- its twin (the same program without the stale head, or with nothing wrong
  at all when the part serves the stale verdict) is never called clean
  where the part was needed: inconclusive, gate exit 3.
"""
import os
import sys
import textwrap
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "leaks"))
sys.path.insert(0, str(HERE))

from audit_points import assert_every_audit, judged_stale_bytes  # noqa: E402
from leakrun import SCENARIOS, audited, cli, growth, report, tpaudit_lines  # noqa: E402

STEPS = 32

# The break each case makes, run inside the audited program (`tpaudit` is
# the probe's package, imported by then).
BREAKS = {
    "forward_descriptor": "tpaudit._forward.compiling_test = lambda torch: broken",
    "replacement_events": "tpaudit._hooks._on_module_set = tpaudit._hooks._on_param_set = broken",
    "growth_watch": "tpaudit._allocator.live_bytes = broken",
    "ledger": "tpaudit._ledger.build = broken",
    "holder_walk": "tpaudit._ledger._holders.find = broken",
    "creation_stacks": "tpaudit._growth.CreationRecorder.start = staticmethod(broken)",
    "wrapper_discovery": "tpaudit.frameworks.holders.from_frames = broken",
    "framework:generic": "tpaudit.frameworks.generic.tensor_maps = broken",
    # a framework table read on a class it claims (torch's own, here) whose entry is gone
    "framework:colossalai": "c = tpaudit.frameworks.colossalai; c.MODULE_PREFIXES = ('torch.',); c.CLASSES = None",
    "framework:fsdp2": "tpaudit.frameworks.fsdp2.live_twins = broken",
}
SHIM = '''\
import os
import tpaudit._allocator, tpaudit._forward, tpaudit._growth, tpaudit._hooks, tpaudit._ledger
import tpaudit.frameworks.colossalai, tpaudit.frameworks.fsdp2, tpaudit.frameworks.generic
import tpaudit.frameworks.holders
import tpaudit._versions


def broken(*args, **kwargs):
    raise AttributeError("module 'torch' has no attribute 'gone'")


exec(os.environ["BREAK_PART"])
'''
NEEDED = {"growth_watch": "growth", "ledger": "growth", "holder_walk": "growth", "replacement_events": "stale",
          "wrapper_discovery": "stale", "framework:generic": "stale", "framework:colossalai": "stale",
          "framework:fsdp2": "stale"}


def run(tmp_path, name, case, code):
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(SHIM)
    env = {"PYTHONPATH": os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])),
           "BREAK_PART": code}
    out, r = audited(tmp_path, name, [sys.executable, SCENARIOS / "plain.py", case, "--steps", STEPS], env=env)
    assert r.returncode == 0, r.stderr[-4000:]
    return out, r, report(out)


def own_lines(r):
    """The probe's own lines (not the verdict lines of the shim and of `run`)."""
    return [l for l in tpaudit_lines(r.stderr) if not l.startswith(("tpaudit: verdict:", "tpaudit: next:", "tpaudit: at step"))]


@pytest.mark.parametrize("part", sorted(BREAKS))
def test_a_broken_part_turns_off_alone(tmp_path, part):
    out, r, doc = run(tmp_path, "buggy", "kept_and_stale", BREAKS[part])
    lines = own_lines(r)
    assert len(lines) == 1 and lines[0].startswith("tpaudit: probe part %s off after an internal error" % part) \
        and "; lost: " in lines[0], r.stderr[-4000:]
    (run_doc,) = doc["runs"]
    needed = NEEDED.get(part)
    want = "on; unjudged: %s; parts off: %s" % (needed, part) if needed else "on; parts off: " + part
    assert run_doc["python"] == want, run_doc["python"]
    # ownership facts and stale detection go on (with the replacement events
    # off from the start, the replaced head's params were never named)
    stale = sorted(str(f["tensor"]["name"]) for f in doc["findings"] if f["kind"] == "stale_param")
    assert stale == (["None", "None"] if part == "replacement_events" else ["3.bias", "3.weight"]), doc["findings"]
    # every audit holds the head from step 1 on, but the growth audit at exit,
    # taken after train() let its optimizer go
    held = judged_stale_bytes(doc)
    assert held == (1024 * 256 + 1024) * 4
    assert_every_audit(doc, lambda step, rank: 0 if step == STEPS else held)
    # an error found stands: the gate fails (1), never inconclusive (3) for a part off
    assert cli("gate", out).returncode == 1
    if needed != "growth":  # the rest of the leak side still finds the growth
        assert growth(doc), doc["findings"]

    # the twin: the same leak without the stale head when the part serves the
    # growth verdict (or no part of it), a program with nothing wrong when it
    # serves the stale verdict
    twin_case = "warmup" if needed == "stale" or part == "forward_descriptor" else "kept"
    out, r, doc = run(tmp_path, "twin", twin_case, BREAKS[part])
    assert any(l.startswith("tpaudit: probe part %s off" % part) for l in own_lines(r)), r.stderr[-4000:]
    errors = [f for f in doc["findings"] if f["severity"] == "error"]
    gate = cli("gate", out).returncode
    if needed:
        assert not errors and gate == 3, (gate, doc["findings"])
        (run_doc,) = doc["runs"]
        assert run_doc["inconclusive"] and part in run_doc["why_inconclusive"], run_doc
        assert "INCONCLUSIVE" in cli("report", out).stdout
    elif twin_case == "kept":  # creation stacks off: the growth is found, its line is not told
        (finding,) = growth(doc)
        assert not finding.get("created_at"), finding
        assert gate == 1
    else:  # the part serves no verdict: a correct program is clean
        assert not errors and gate == 0, doc["findings"]


def test_torch_outside_the_range_says_so_once_and_audits(tmp_path):
    out, r, doc = run(tmp_path, "outside", "kept_and_stale", "tpaudit._versions.MAXIMUM = (2, 0)")
    lines = own_lines(r)
    assert len(lines) == 1 and "is outside the probe's supported range (torch 2.1 to 2.0)" in lines[0], r.stderr
    assert doc["runs"][0]["python"] == "on"
    assert {f["tensor"]["name"] for f in doc["findings"] if f["kind"] == "stale_param"} == {"3.weight", "3.bias"}
