"""Checks of scripts/gpu_oom.sh: the finding each OOM case must give, read
from its JSON report (OUT/<case>.json) by the checks the CI fixtures share
(oom_checks.py), then those of the device-only cases (finder, tprt) and
the free-of-tpaudit twin of each (OUT/summary rows).  Prints one `check:`
line each and exits 1 when one failed.  usage: judge.py OUT TPAUDIT"""
import json
import re
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import oom_checks  # noqa: E402

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
        return None
    return doc if kind is None else [f for f in doc["findings"] if f["kind"] == kind]


def gate(case):
    return subprocess.run([tpaudit, "gate", str(out / case)], capture_output=True, text=True).returncode


for case in oom_checks.EXPECT:
    doc = findings(case)
    if doc is not None:
        oom_checks.check_case(case, doc, gate(case), check)
        share, left = oom_checks.named_share(doc["runs"][0])
        check(share >= oom_checks.NAMED_SHARE, "%s: named owners hold >= %d%% of the memory allocated at the OOM "
              "(%.2f%%, %.1f MiB unattributed)" % (case, 100 * oom_checks.NAMED_SHARE, 100 * share, left / (1 << 20)))
        f = [f for f in doc["findings"] if f["kind"] == "out_of_memory"]
        if f:  # what the findings show, for docs/GPU_RUNS.md
            o = f[0]["oom"]
            print("case: %s cause %s: %s | stack %s" % (case, o["cause"], o["cause_text"],
                                                        oom_checks.frames_text(o["python_stack"])[:3]))
compiled = findings("logits_compiled", "out_of_memory") or []
eager = findings("logits", "out_of_memory") or []
check(len(compiled) == 1 and compiled[0]["oom"]["cause"] == "growth",
      "logits_compiled: one out_of_memory, cause growth (%s)" % [f["oom"]["cause"] for f in compiled])
if compiled and eager:  # compiled: the same holder and lines as in eager mode
    where = lambda t: sorted(set(re.findall(r"gpu_oom_cases\.py:\d+", t)))
    text, other = eager[0]["oom"]["cause_text"], compiled[0]["oom"]["cause_text"]
    check("kept" in other and where(other) == where(text),
          "logits_compiled: names `kept` and the eager run's lines %s: %s" % (where(text), other))
check(not (findings("finder", "out_of_memory") or []), "finder: not judged died of OOM")
caught = findings("finder", "caught_out_of_memory") or []
check(len(caught) >= 1 and all(c["severity"] == "warning" for c in caught),
      "finder: caught OOMs are warnings (%d)" % len(caught))
check(gate("finder") == 0, "finder: the default gate passes")
f = findings("tprt", "out_of_memory") or []
check(len(f) == 1 and f[0]["oom"]["cause"] == "allocation", "tprt: one out_of_memory, cause allocation")
if f:
    stack = f[0]["oom"]["native_stack"]
    named = [fr for fr in stack if "gpt2_cuda" in (fr["file"] or "") or "tprt" in (fr["module"] or "")]
    check(f[0]["oom"]["source"] == "cuda" and bool(named),
          "tprt: the native stack names tprt's allocation: %s" % ["%s:%s %s" % (fr["file"], fr["line"], fr["function"])
                                                                for fr in stack[:6]])
sys.exit(1 if failed else 0)
