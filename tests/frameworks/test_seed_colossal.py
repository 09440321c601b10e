"""The seed bug itself (ColossalAI issue #5539), on the seed's own releases:
ColossalAI 0.3.6, torch 2.2.1 and transformers 4.36.2 (requirements-seed.lock,
scripts/setup_pinned.sh seed), unmodified.  HybridParallelPlugin with TP=2 and
TP=4 (that many gloo ranks under torchrun, on the CPU) on a GPT-2 built from a
config whose vocabulary, 1001, no TP degree divides: 0.3.6's GPT-2 policy pads
it with resize_token_embeddings in preprocess(), after the optimizer was made,
so the optimizer keeps the old unsharded table and trains nothing of the new
sharded one.  On every rank the report must name the stale [1001,64] wte (and,
untied, lm_head), its successor and that untrained shard with their shapes,
and fail the gate; every audit point must retain the bytes the program itself
finds by identity (the optimizer's trained tensors that are not the model's,
printed by each rank); under --fail-fast each rank stops at its step-1 audit
with exit status 4.  ColossalAI 0.5.0's correct policy is the clean twin
(test_colossal.py).  scenarios/colossal_hybrid.py is the program."""
import json
import os
import re
import sqlite3
import subprocess
from pathlib import Path

import pytest

from test_frameworks import ENV, HERE, TPAUDIT, assert_every_audit

PYTHON = os.environ.get("TPAUDIT_SEED_PYTHON", "")
pytestmark = pytest.mark.skipif(not Path(PYTHON or "/nonexistent").exists(),
                                reason="no seed venv (%s): scripts/setup.sh makes it (scripts/setup_pinned.sh seed)"
                                % (PYTHON or "TPAUDIT_SEED_PYTHON unset"))

VOCAB, EMBD = 1001, 64
# Each TP degree with both precisions and both weight tyings between them,
# to keep CI's time (docs/CI.md).
CASES = [(2, "fp32", "tied"), (2, "bf16", "untied"), (4, "fp32", "untied"), (4, "bf16", "tied")]
IDS = ["tp%d-%s-%s" % c for c in CASES]


def run(tmp_path, tp, precision, tie, fail_fast=False):
    out = tmp_path / ("tp%d-%s-%s%s" % (tp, precision, tie, "-ff" if fail_fast else ""))
    argv = [PYTHON, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(tp),
            str(HERE / "scenarios" / "colossal_hybrid.py"), precision, tie]
    env = dict(os.environ, **ENV)
    env.pop("TPAUDIT_AUDIT", None)  # the default plan: steps 1, 2 and the exit
    r = subprocess.run([TPAUDIT, "run"] + (["--fail-fast"] if fail_fast else []) + ["-o", str(out), "--", *argv],
                       env=env, capture_output=True, text=True, timeout=600)
    rep = subprocess.run([TPAUDIT, "report", "--format", "json", str(out)], capture_output=True, text=True)
    assert rep.returncode == 0, rep.stderr + r.stdout[-2000:] + r.stderr[-3000:]
    gate = subprocess.run([TPAUDIT, "gate", str(out)], capture_output=True, text=True)
    return r, json.loads(rep.stdout), gate.returncode, out


def by_identity(r, tp):
    """rank -> the stale bytes that rank's program found by identity."""
    found = {int(k): int(v) for k, v in re.findall(r"^rank (\d+): stale by identity (\d+)$", r.stdout, re.M)}
    assert sorted(found) == list(range(tp)), r.stdout[-3000:] + r.stderr[-3000:]
    return found


def rank_rows(out, sql):
    """rank -> the rows of `sql` in that rank's database."""
    rows = {}
    for db in sorted(out.glob("*.db")):
        with sqlite3.connect("file:%s?mode=ro" % db, uri=True) as con:
            rank = con.execute("SELECT rank FROM run").fetchone()[0]
            if rank is not None:
                rows[rank] = con.execute(sql).fetchall()
    return rows


def replaced(tie):
    return ["transformer.wte.weight"] + ([] if tie == "tied" else ["lm_head.weight"])


def assert_names_the_stale_wte(doc, tp, precision, tie, ranks=None):
    shard = [(VOCAB + tp - VOCAB % tp) // tp, EMBD]  # the padded vocabulary, split tp ways
    stale_kind = "stale_param" if precision == "fp32" else "stale_map_entry"
    for rank in range(tp) if ranks is None else ranks:
        found = [f for f in doc["findings"] if f["rank"] == rank]
        stale = {f["tensor"]["name"].rsplit("module.", 1)[-1]: f for f in found if f["kind"] == stale_kind}
        untrained = {f["tensor"]["name"].rsplit("module.", 1)[-1]: f for f in found
                     if f["kind"] == "untrained_param"}
        messages = [f["message"] for f in found]
        assert sorted(stale) == sorted(untrained) == sorted(replaced(tie)), messages
        assert len(found) == 2 * len(replaced(tie)), messages
        for name, f in stale.items():
            # the old table left the model before HybridParallelModule cast it
            assert f["tensor"]["shape"] == [VOCAB, EMBD] and f["tensor"]["dtype"] == "float32", f
            assert f["retained_bytes"] == VOCAB * EMBD * 4, f
            assert f["successor"]["name"].endswith(name) and f["successor"]["local_shape"] == shard, f
            frames = [((fr.get("file") or "").replace("\\", "/"), fr.get("function")) for fr in f["replaced_at"]]
            assert any(fn == "resize_token_embeddings" for _, fn in frames), frames
            assert ("preprocess" in [fn for path, fn in frames if path.endswith("shardformer/policies/gpt2.py")]), frames
        for f in untrained.values():
            assert f["tensor"]["local_shape"] == shard and f["severity"] == "error", f
            assert f["tensor"]["dtype"] == ("float32" if precision == "fp32" else "bfloat16"), f


@pytest.mark.parametrize("tp,precision,tie", CASES, ids=IDS)
def test_seed_names_the_stale_wte_on_every_rank_at_every_audit(tmp_path, tp, precision, tie):
    r, doc, gate, out = run(tmp_path, tp, precision, tie)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    assert gate == 1
    runs = {x["rank"]: x for x in doc["runs"] if x["rank"] is not None}
    assert sorted(runs) == list(range(tp)) and all(x["world_size"] == tp for x in runs.values()), doc["runs"]
    assert_names_the_stale_wte(doc, tp, precision, tie)
    stale = by_identity(r, tp)
    assert stale == {rank: len(replaced(tie)) * VOCAB * EMBD * 4 for rank in range(tp)}, stale
    # made inside booster.boost, before step 1: both step audits hold it
    assert assert_every_audit(doc, lambda step, rank: stale[rank], steps=[1, 2]) == 2 * tp


@pytest.mark.parametrize("tp,precision,tie", CASES, ids=IDS)
def test_seed_under_fail_fast_stops_at_the_step_1_audit(tmp_path, tp, precision, tie):
    r, doc, gate, out = run(tmp_path, tp, precision, tie, fail_fast=True)
    # A rank stopped by the probe ends with exit status 4, which torchrun reports as
    # its own failure (1) and then ends the other ranks (SIGTERM); one still in its
    # step-1 audit then leaves its database incomplete.
    assert r.returncode == 1, r.stdout[-2000:] + r.stderr[-3000:]
    ends = rank_rows(out, "SELECT complete, exit_status FROM run")
    audits = rank_rows(out, "SELECT label, step FROM audit ORDER BY id")
    stopped = sorted(k for k, v in ends.items() if v == [(1, 4)])
    assert stopped and sorted(ends) == list(range(tp)), ends
    assert all(v == [(0, None)] for k, v in ends.items() if k not in stopped), ends
    assert all(audits[k] == [("step", 1)] for k in stopped), audits
    assert all(audits[k] in ([], [("step", 1)]) for k in ends), audits
    assert "loss" not in r.stdout
    lines = [line for line in r.stderr.splitlines() if line.startswith("tpaudit: at step 1 (rank ")]
    named = sorted(int(line.split("(rank ")[1].split(")")[0]) for line in lines)
    assert set(stopped) <= set(named), r.stderr[-3000:]
    assert all(line.endswith("stopping the run (fail-fast, exit status 4)") for line in lines), lines
    assert gate == 1
    assert_names_the_stale_wte(doc, tp, precision, tie, ranks=stopped)
    stale = by_identity(r, tp)
    assert assert_every_audit(doc, lambda step, rank: stale[rank], steps=[1]) >= len(stopped)
