"""Checks of scripts/gpu_oom.sh: the finding each OOM case must give, read
from its JSON report (OUT/<case>.json).  Prints one `check:` line each and
exits 1 when one failed.  usage: judge.py OUT TPAUDIT"""
import json
import re
import subprocess
import sys
from pathlib import Path

out, tpaudit = Path(sys.argv[1]), sys.argv[2]
failed = []


def check(ok, what):
    print("check: %s %s" % ("ok  " if ok else "FAIL", what))
    if not ok:
        failed.append(what)


def findings(case, kind=None):
    try:
        doc = json.loads((out / (case + ".json")).read_text())
    except (OSError, ValueError) as exc:
        check(False, "%s: no JSON report (%s)" % (case, exc))
        return []
    return [f for f in doc["findings"] if kind is None or f["kind"] == kind]


def died(case, cause):
    f = findings(case, "out_of_memory")
    check(len(f) == 1, "%s: one out_of_memory finding (%d)" % (case, len(f)))
    if f:
        o = f[0]["oom"]
        check(o["cause"] == cause, "%s: cause %s (%s: %s)" % (case, cause, o["cause"], o["cause_text"]))
        return f[0]
    return None


f = died("logits", "growth")
if f:
    text = f["oom"]["cause_text"]
    check("kept" in text and "gpu_oom_cases.py:" in text, "logits: names `kept`, its rate and line: " + text)
    g = died("logits_compiled", "growth")
    if g:  # compiled: the same holder and line as in eager mode
        where = lambda t: sorted(set(re.findall(r"gpu_oom_cases\.py:\d+", t)))
        other = g["oom"]["cause_text"]
        check("kept" in other and where(other) == where(text),
              "logits_compiled: names `kept` and the eager run's lines %s: %s" % (where(text), other))
died("batch", "step_peak")
check(not findings("batch", "memory_growth"), "batch: no memory_growth finding")
f = died("frag", "fragmentation")
if f:
    check("expandable_segments:True" in f["oom"]["cause_text"], "frag: names expandable_segments:True")
check(not findings("finder", "out_of_memory"), "finder: not judged died of OOM")
caught = findings("finder", "caught_out_of_memory")
check(len(caught) >= 1 and all(c["severity"] == "warning" for c in caught),
      "finder: caught OOMs are warnings (%d)" % len(caught))
gate = subprocess.run([tpaudit, "gate", str(out / "finder")], capture_output=True, text=True)
check(gate.returncode == 0, "finder: the default gate passes (exit %d)" % gate.returncode)
gate = subprocess.run([tpaudit, "gate", str(out / "logits")], capture_output=True, text=True)
check(gate.returncode == 1, "logits: the default gate fails (exit %d)" % gate.returncode)
f = died("tprt", "allocation")
if f:
    stack = f["oom"]["native_stack"]
    named = [fr for fr in stack if "gpt2_cuda" in (fr["file"] or "") or "tprt" in (fr["module"] or "")]
    check(f["oom"]["source"] == "cuda" and bool(named),
          "tprt: the native stack names tprt's allocation: %s" % ["%s:%s %s" % (fr["file"], fr["line"], fr["function"])
                                                                for fr in stack[:6]])
sys.exit(1 if failed else 0)
