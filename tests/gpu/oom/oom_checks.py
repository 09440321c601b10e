"""What each OOM case of gpu_oom_cases.py must be found as: its verdict,
cause, holder, line and default gate, checked on the device from each
case's JSON report (judge.py) and in CI from the database the device run
made of it (tests/analyzer/test_oom_fixtures.py).  A line is named by its
`# oom-line: <name>` comment in gpu_oom_cases.py."""
import re
from pathlib import Path

CASES_FILE = Path(__file__).resolve().parent / "gpu_oom_cases.py"

# case -> kind of the verdict's finding, cause, words the cause must hold
# (the holder), the oom-lines of which its creation line must be one (for
# growth: where the kept tensors were made, or the line that keeps them) or
# the OOM's Python stack must hold (for the step's peak), default gate exit.
EXPECT = {
    "logits": dict(kind="out_of_memory", cause="growth", holder="`kept`", line=("forward", "logits"), gate=1),
    "list-module": dict(kind="out_of_memory", cause="growth", holder="`kept`",
                        line=("list-module-forward", "list-module"), gate=1),
    "losses": dict(kind="out_of_memory", cause="growth", holder="losses`", line=("forward", "losses"), gate=1),
    "eval-module": dict(kind="out_of_memory", cause="growth", holder="`outs`", line=("eval-module",), gate=1),
    "eval-function": dict(kind="out_of_memory", cause="growth", holder="`outs`", line=("eval-function",), gate=1),
    "batch": dict(kind="out_of_memory", cause="step_peak", holder=None, line=("forward",), gate=1),
    "batch-backward": dict(kind="out_of_memory", cause="step_peak", holder=None, line=("backward",), gate=1),
    "frag": dict(kind="out_of_memory", cause="fragmentation", holder="expandable_segments:True", line=(), gate=1),
    "pin-thread": dict(kind="out_of_memory", cause="too_large", holder=None, line=("pin-thread",), gate=1),
}
# the cases with a database kept as a CI fixture (finder and tprt stay device-only)
FIXTURE_CASES = tuple(EXPECT)


def oom_lines():
    """{name: line number} of the `# oom-line: <name>` comments."""
    out = {}
    for number, text in enumerate(CASES_FILE.read_text().splitlines(), 1):
        m = re.search(r"# oom-line: ([\w-]+)", text)
        if m:
            out[m.group(1)] = number
    return out


def frames_text(frames):
    return ["%s:%s %s" % (Path(f.get("file") or "?").name, f.get("line"), f.get("function")) for f in frames[:8]]


NAMED_SHARE = 0.99  # of the device memory allocated at the OOM, named owners hold at least this


def named_share(run):
    """(named owners' bytes / allocated bytes, unattributed bytes) of a run's
    ledger (the one at the OOM): allocated is the measured total less the
    allocator's free cache."""
    rows = run.get("ledger") or []
    cache = sum(r["bytes"] for r in rows if r["owner_kind"] == "allocator_cache")
    left = sum(r["bytes"] for r in rows if r["owner_kind"] == "unattributed")
    allocated = (run.get("ledger_total") or 0) - cache
    return ((allocated - left) / allocated if allocated > 0 else 0.0), left


def check_case(case, doc, gate_exit, check):
    """Calls check(ok, what) for each fact case's report `doc` (the JSON
    report) and the default gate's exit status must show: verdict, cause,
    holder, line, gate (the named share of the ledger is judge.py's, on the
    device only)."""
    want = EXPECT[case]
    died = [f for f in doc["findings"] if f["kind"] == want["kind"]]
    check(len(died) == 1, "%s: one %s finding (%d)" % (case, want["kind"], len(died)))
    check(gate_exit == want["gate"], "%s: the default gate exits %d (%d)" % (case, want["gate"], gate_exit))
    if not died:
        return
    oom = died[0]["oom"]
    check(oom["cause"] == want["cause"], "%s: cause %s (%s: %s)" % (case, want["cause"], oom["cause"], oom["cause_text"]))
    if want["holder"]:
        check(want["holder"] in oom["cause_text"], "%s: the cause names %s: %s" % (case, want["holder"], oom["cause_text"]))
    stack = oom["python_stack"]
    check(bool(stack) and Path(stack[0]["file"] or "").name == CASES_FILE.name,
          "%s: the OOM's stack starts at the user's line: %s" % (case, frames_text(stack)))
    if want["cause"] == "growth":
        growth = [f for f in doc["findings"] if f["kind"] == "memory_growth"]
        check(bool(growth), "%s: its memory_growth finding stands beside it (%d)" % (case, len(growth)))
        made = re.search(r"made at ([^:,]+):(\d+)", oom["cause_text"])
        lines = [oom_lines()[name] for name in want["line"]]
        check(bool(made) and made.group(1) == CASES_FILE.name and int(made.group(2)) in lines,
              "%s: the cause gives the creation line %s:%s: %s" % (case, CASES_FILE.name, lines, oom["cause_text"]))
    elif want["line"]:
        lines = [oom_lines()[name] for name in want["line"]]
        check(any(Path(f["file"] or "").name == CASES_FILE.name and f["line"] in lines for f in stack),
              "%s: the OOM's stack names the %s line %s inside its function: %s" % (case, want["line"], lines,
                                                                                  frames_text(stack)))
