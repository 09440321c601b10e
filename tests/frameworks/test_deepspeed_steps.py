"""The real DeepSpeed on the CPU with a client torch AdamW, under
`tpaudit run --fail-fast`, where a verdict is acted on at the first audit
that has an error.  With bf16, ZeRO-0's wrapper (FP16_UnfusedOptimizer on the
CPU) runs a dummy optimizer step inside deepspeed.initialize, before any
forward: the inner AdamW's step 1, audited while its groups hold fp32 masters
that no module owns.  A correct run of
ZeRO-0 bf16, ZeRO-0 fp32 and ZeRO-1 bf16 is clean at step 1 and at every
later audit, and runs to its end; a ZeRO-0 run whose head was replaced before
deepspeed.initialize, after its parameters were listed for the AdamW and
model_parameters, is caught at step 1 (ZeRO-1 and 2 refuse such a list with
a KeyError, so need no such twin).  scenarios/deepspeed_zero.py is the
program."""
import json
import os
import re
import sqlite3
import subprocess
import sys

import pytest

from test_frameworks import ENV, HERE, TPAUDIT, assert_every_audit

CORRECT = [("0", "bf16"), ("0", "fp32"), ("1", "bf16")]
# The replaced head, Linear(32, 4): its weight [4,32] and bias [4], by dtype.
HEAD_BYTES = {"bf16": (4 * 32 + 4) * 2, "fp32": (4 * 32 + 4) * 4}


def fail_fast(tmp_path, stage, precision, *args):
    out = tmp_path / ("zero%s-%s%s" % (stage, precision, "".join(args)))
    argv = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "1",
            str(HERE / "scenarios" / "deepspeed_zero.py"), stage] + (["--fp32"] if precision == "fp32" else [])
    env = dict(os.environ, **ENV)
    env.pop("TPAUDIT_AUDIT", None)  # the default plan: steps 1, 2 and the exit
    r = subprocess.run([TPAUDIT, "run", "--fail-fast", "-o", str(out), "--", *argv, *args], env=env,
                       capture_output=True, text=True, timeout=600)
    rep = subprocess.run([TPAUDIT, "report", "--format", "json", str(out)], capture_output=True, text=True)
    assert rep.returncode == 0, rep.stderr
    gate = subprocess.run([TPAUDIT, "gate", str(out)], capture_output=True, text=True)
    lines = [line for line in r.stderr.splitlines() if line.startswith("tpaudit:")]
    return r, lines, json.loads(rep.stdout), gate.returncode, out


def rank0(out, sql):
    """The rows of `sql` in rank 0's database."""
    for db in sorted(out.glob("*.db")):
        with sqlite3.connect("file:%s?mode=ro" % db, uri=True) as con:
            if con.execute("SELECT rank FROM run").fetchone()[0] == 0:
                return con.execute(sql).fetchall()
    raise AssertionError("no rank 0 database in %s" % out)


def rank0_audits(out):
    """(label, step) of rank 0's audits."""
    return rank0(out, "SELECT label, step FROM audit ORDER BY id")


@pytest.mark.parametrize("stage,precision", CORRECT, ids=["zero%s-%s" % c for c in CORRECT])
def test_correct_run_is_clean_from_step_1_and_runs_to_its_end(tmp_path, stage, precision):
    r, lines, doc, gate, out = fail_fast(tmp_path, stage, precision)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    assert "loss" in r.stdout
    assert lines[0].startswith("tpaudit: verdict: clean"), lines
    assert doc["findings"] == [] and gate == 0, [f["message"] for f in doc["findings"]]
    assert not any(run["inconclusive"] for run in doc["runs"]), doc["runs"]
    assert rank0_audits(out)[:2] == [("step", 1), ("step", 2)]
    assert_every_audit(doc, 0, rank=0, steps=[1, 2])


@pytest.mark.parametrize("precision", ["bf16", "fp32"])
def test_zero0_head_replaced_before_initialize_is_caught_at_step_1(tmp_path, precision):
    r, lines, doc, gate, out = fail_fast(tmp_path, "0", precision, "--seed-before")
    kind = "stale_map_entry" if precision == "bf16" else "stale_param"
    # rank 0 ends with exit status 4, which torchrun reports as its own failure (1)
    assert r.returncode == 1, r.stdout[-2000:] + r.stderr[-3000:]
    assert rank0(out, "SELECT complete, exit_status FROM run") == [(1, 4)]
    assert "loss" not in r.stdout
    assert lines[0].startswith("tpaudit: at step 1: %s: " % kind), lines
    assert re.search(r" (module\.)?2\.(weight \[4,32\]|bias \[4\]), which is no longer", lines[0]), lines
    assert "deepspeed_zero.py" in lines[0] and lines[0].endswith(
        "4 errors, %d B retained at this audit; stopping the run (fail-fast, exit status 4)" % HEAD_BYTES[precision])
    assert rank0_audits(out) == [("step", 1)]
    stale = {f["tensor"]["name"].rsplit("module.", 1)[-1]: f for f in doc["findings"] if f["kind"] == kind}
    assert sorted(stale) == ["2.bias", "2.weight"], [f["message"] for f in doc["findings"]]
    assert all(f["step"] == 1 and f["successor"] for f in stale.values()), stale
    assert gate == 1
    assert_every_audit(doc, HEAD_BYTES[precision], rank=0, steps=[1])
