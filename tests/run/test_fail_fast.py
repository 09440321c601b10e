"""`tpaudit run --fail-fast` on the demo (examples/finetune.py): the buggy
order stops at the step-1 audit, before step 2, with exit status 4, its one
`tpaudit:` line and a complete database that `report` and `gate` read; the
fixed order runs as it does without tpaudit (same exit status and output,
no line).  Needs TPAUDIT_BUILD."""
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

BUILD = Path(os.environ["TPAUDIT_BUILD"])
SRC = Path(__file__).resolve().parents[2]
TPAUDIT = str(BUILD / "bin" / "tpaudit")
FINETUNE = str(SRC / "examples" / "finetune.py")
DEMO = ["--steps", "3", "--channels", "16", "--device", "cpu"]


def run(*args):
    env = {k: v for k, v in os.environ.items() if k not in ("TPAUDIT_OUT", "TPAUDIT_FAIL_FAST", "LD_PRELOAD")}
    return subprocess.run([*map(str, args)], capture_output=True, text=True, timeout=300,
                          env=dict(env, PYTHONUNBUFFERED="1"))


def tpaudit_lines(stderr):
    return [line for line in stderr.splitlines() if line.startswith("tpaudit:")]


def test_fail_fast_stops_the_buggy_demo_at_step_1(tmp_path):
    out = tmp_path / "out"
    r = run(TPAUDIT, "run", "--fail-fast", "-o", out, "--", sys.executable, FINETUNE, "--order", "buggy", *DEMO)
    assert r.returncode == 4, r.stderr
    assert "step 1:" not in r.stdout and "step 2:" not in r.stdout  # stopped in step 1's audit
    lines = tpaudit_lines(r.stderr)
    assert lines[0].startswith("tpaudit: at step 1: stale_param: AdamW param_groups[0].params[0] holds wte.weight "
                               "[50257,16]"), lines
    assert "finetune.py:" in lines[0] and " in pad_vocab" in lines[0]
    assert lines[0].endswith("; stopping the run (fail-fast, exit status 4)")
    assert lines[1].startswith("tpaudit: verdict: STALE TENSORS: 2 errors"), lines
    (db,) = out.glob("*.db")
    con = sqlite3.connect(str(db))
    assert con.execute("select complete, exit_status, ended_by, dropped_events from run").fetchone() == (
        1, 4, "exit", 0)
    assert con.execute("select label, step, end_ns is not null from audit").fetchall() == [("step", 1, 1)]
    report = run(TPAUDIT, "report", "--format", "json", out)
    assert report.returncode == 0, report.stderr
    doc = json.loads(report.stdout)
    assert not doc["runs"][0]["inconclusive"]
    assert {(f["kind"], f["tensor"]["name"]) for f in doc["findings"]} == {
        ("stale_param", "wte.weight"), ("untrained_param", "wte.weight")}
    assert run(TPAUDIT, "gate", "--max-retained", "0", out).returncode == 1


def test_fail_fast_leaves_the_fixed_demo_alone(tmp_path):
    plain = run(sys.executable, FINETUNE, "--order", "fixed", *DEMO)
    r = run(TPAUDIT, "run", "--fail-fast", "-o", tmp_path / "out", "--", sys.executable, FINETUNE, "--order",
            "fixed", *DEMO)
    assert r.returncode == plain.returncode == 0, r.stderr
    assert r.stdout == plain.stdout and r.stdout.count("loss") == 3
    lines = tpaudit_lines(r.stderr)
    assert len(lines) == 2 and lines[0].startswith("tpaudit: verdict: clean: 2 audits"), lines


def test_fail_fast_in_the_usage():
    r = run(TPAUDIT, "run", "--help")
    assert r.returncode == 0 and "--fail-fast" in r.stdout
