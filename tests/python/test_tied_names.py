"""Names and lines of a tied weight: GPT-2 (transformers' GPT2LMHeadModel from
a small GPT2Config, on the CPU) whose embedding is replaced through
set_input_embeddings + tie_weights after the optimizer was built
(scenarios/tied_names.py, run unmodified under `tpaudit run`).  The stale
table must be named by the model's own first name for it,
transformer.wte.weight, with lm_head.weight as its alias; "replaced at" must
be the set_input_embeddings line, the tie_weights line listed after it; under
DDP and a DeepSpeed engine both the stale table and its successor carry the
wrapper's `module.` prefix.  Each case's twin, which pads the vocabulary before
the optimizer, must report nothing after its audits."""
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from audit_points import assert_every_audit, stale_from

HERE = Path(__file__).resolve().parent
SCEN = HERE / "scenarios" / "tied_names.py"
LIB = os.environ["TPAUDIT_TEST_LIB"]
TPAUDIT = str(Path(LIB).parents[1] / "bin" / "tpaudit")
ENV = {"TPAUDIT_AUDIT": "1,2", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "OMP_NUM_THREADS": "1",
       "DS_ACCELERATOR": "cpu", "PYTHONWARNINGS": "ignore", "TOKENIZERS_PARALLELISM": "false"}


def line_of(marker):
    lines = SCEN.read_text().splitlines()
    (number,) = [i + 1 for i, text in enumerate(lines) if text.rstrip().endswith("# " + marker)]
    return number


SET, TIE = line_of("SET_EMBEDDINGS"), line_of("TIE_WEIGHTS")


def audited(tmp_path, case, twin=False):
    out = tmp_path / (case + ("-twin" if twin else ""))
    argv = [sys.executable, str(SCEN), case] + (["--twin"] if twin else [])
    r = subprocess.run([TPAUDIT, "run", "-o", str(out), "--", *argv], env=dict(os.environ, **ENV),
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return out


def report(out, fmt):
    r = subprocess.run([TPAUDIT, "report", "--format", fmt, str(out)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout) if fmt == "json" else r.stdout


def user_lines(frames):
    """Lines of the scenario's pad_vocab in a stack."""
    return [f["line"] for f in frames if (f["file"] or "").endswith("tied_names.py") and f["function"] == "pad_vocab"]


def the_stale(doc):
    (stale,) = [f for f in doc["findings"] if f["kind"] in ("stale_param", "stale_map_entry")]
    return stale


def block(text, title, end):
    """The lines of the text report from `title` up to `end`."""
    start = text.index(title)
    stop = text.find(end, start + len(title))
    return text[start:stop if stop >= 0 else len(text)]


# deepspeed is in the main venv only, not in the torch matrix's older ones (docs/CI.md)
needs_deepspeed = pytest.mark.skipif(importlib.util.find_spec("deepspeed") is None,
                                     reason="deepspeed is not installed in this venv")
WRAPPED = [("tied", ""), ("ddp", "module."), pytest.param("deepspeed", "module.", marks=needs_deepspeed)]


@pytest.mark.parametrize("case,prefix", WRAPPED, ids=["tied", "ddp", "deepspeed"])
def test_tied_table_named_by_its_module_and_replaced_at_the_users_line(tmp_path, case, prefix):
    out = audited(tmp_path, case)
    doc = report(out, "json")
    f = the_stale(doc)
    wte, head = prefix + "transformer.wte.weight", prefix + "lm_head.weight"
    assert f["tensor"]["name"] == wte and f["tensor"]["aliases"] == [head]
    assert f["tensor"]["shape"] == [50257, 32] and f["retained_bytes"] > 0
    assert f["successor"]["name"] == wte and f["successor"]["shape"] == [50260, 32]
    assert user_lines(f["replaced_at"]) == [SET]
    assert [(r["name"], user_lines(r["at"])) for r in f["later_replacements"]] == [(head, [TIE])]
    (untrained,) = [u for u in doc["findings"] if u["kind"] == "untrained_param"]
    assert untrained["tensor"]["name"] == wte and untrained["tensor"]["aliases"] == [head]

    text = report(out, "text")
    summary = [line.split() for line in text.splitlines() if "stale_" in line and "[50257,32]" in line]
    assert summary and all(wte in line for line in summary), summary
    assert "also named: " + head in text
    first = block(text, "replaced at", "replaced again")
    assert "tied_names.py:%d in pad_vocab" % SET in first and "tied_names.py:%d " % TIE not in first
    again = block(text, "replaced again, as %s, at" % head, "created at")
    assert "tied_names.py:%d in pad_vocab" % TIE in again

    html = report(out, "html")
    assert "also " + head in html and "replaced again, as %s, at" % head in html
    assert html.index("<span class=\"tensor\">%s</span>" % wte) >= 0
    assert_baseline_matches_by_alias(tmp_path, out, doc, head)
    assert_every_audit(doc, stale_from(doc, 1), steps=[1, 2])


def assert_baseline_matches_by_alias(tmp_path, out, doc, head):
    """A baseline report that named the stale table by its alias (as a report
    written before aliases did) is the same finding: nothing new, gate 0;
    one that named another tensor is not: gate 1."""
    def gate_against(name):
        old = json.loads(json.dumps(doc))
        for f in old["findings"]:
            if f["kind"] in ("stale_param", "stale_map_entry"):
                f["tensor"]["name"] = name
                del f["tensor"]["aliases"]
        path = tmp_path / ("baseline-%s.json" % name)
        path.write_text(json.dumps(old))
        return subprocess.run([TPAUDIT, "gate", "--baseline", str(path), str(out)], capture_output=True,
                              text=True).returncode
    assert gate_against(head) == 0
    assert gate_against("transformer.h.0.attn.c_attn.weight") == 1


def test_names_recorded_before_a_wrapper_take_its_prefix_throughout(tmp_path):
    """The table replaced twice (padded, then sharded) before a wrapper took
    the model in: no replacement leads straight to a live successor, so the
    prefix comes from the model as it is now; every name of every finding,
    in JSON and in the text's "also named", is `module.`-prefixed."""
    out = audited(tmp_path, "wrapped_late")
    doc = report(out, "json")
    names = []
    for f in doc["findings"]:
        names += [f["tensor"]["name"], *f["tensor"]["aliases"]]
        names += [r["name"] for r in f.get("later_replacements", [])]
        if f.get("successor"):
            names.append(f["successor"]["name"])
    assert names and all(n.startswith("module.") for n in names), names
    stale = [f for f in doc["findings"] if f["kind"] == "stale_param" and f["tensor"]["shape"] == [50257, 32]]
    assert stale and stale[0]["tensor"]["name"] == "module.transformer.wte.weight", stale
    assert stale[0]["tensor"]["aliases"] == ["module.lm_head.weight"], stale
    also = [l.split(": ", 1)[1] for l in report(out, "text").splitlines() if l.strip().startswith("also named:")]
    assert also and all(n.startswith("module.") for line in also for n in line.split(", ")), also


def test_untied_table_has_no_alias(tmp_path):
    doc = report(audited(tmp_path, "untied"), "json")
    f = the_stale(doc)
    assert f["tensor"]["name"] == "transformer.wte.weight" and f["tensor"]["aliases"] == []
    assert f["successor"]["name"] == "transformer.wte.weight"
    assert user_lines(f["replaced_at"]) == [SET] and f["later_replacements"] == []
    assert_every_audit(doc, stale_from(doc, 1), steps=[1, 2])


@pytest.mark.parametrize("case", ["tied", "untied", "ddp", pytest.param("deepspeed", marks=needs_deepspeed), "wrapped_late"])
def test_padding_before_the_optimizer_reports_nothing(tmp_path, case):
    doc = report(audited(tmp_path, case, twin=True), "json")
    assert doc["findings"] == [], [f["message"] for f in doc["findings"]]
    audited_runs = [r for r in doc["runs"] if r["audits"] >= 2]
    assert audited_runs and not any(r["inconclusive"] for r in audited_runs), doc["runs"]
    assert_every_audit(doc, 0, steps=[1, 2])
