"""ColossalAI, the framework of the original bug report, under `tpaudit run`
on the CPU: HybridParallelPlugin with TP=2 (2 gloo ranks under torchrun) on a
GPT-2 built from a config, fp32 (HybridParallelNaiveOptimizer) and bf16
(HybridParallelAMPOptimizer, a MixedPrecisionOptimizer with
master_to_working_map), tied and untied.  A correct run is clean on each rank
and passes the gate; a seeded run (the old GPT-2 policy's vocabulary resize:
a new embedding after the optimizer was built) names the old unsharded wte on
each rank, with its bytes, its sharded successor and that untrained shard,
and fails the gate.  The packages come from the second venv
(scripts/setup_colossal.sh, TPAUDIT_COLOSSAL_PYTHON); without it these skip.
scenarios/colossal_hybrid.py is the program (also run on the GPU by
scripts/gpu_colossal.sh)."""
import os
import sqlite3
from pathlib import Path

import pytest

from test_frameworks import assert_every_audit, audited, stale_from

PYTHON = os.environ.get("TPAUDIT_COLOSSAL_PYTHON", "")
pytestmark = pytest.mark.skipif(not Path(PYTHON or "/nonexistent").exists(),
                                reason="no ColossalAI venv (%s): scripts/setup.sh makes it (scripts/setup_colossal.sh)"
                                % (PYTHON or "TPAUDIT_COLOSSAL_PYTHON unset"))

DEVICE = os.environ.get("TPAUDIT_COLOSSAL_DEVICE", "cpu")  # scripts/gpu_colossal.sh: cuda
VOCAB, EMBD, TP = 1001, 64, 2
SHARD = [512, EMBD]  # the vocabulary padded to a multiple of 64 * TP, split in two
CONFIGS = [(p, t) for p in ("fp32", "bf16") for t in ("tied", "untied")]


def run(tmp_path, precision, tie, seed):
    args = [precision, tie] + (["--seed"] if seed else [])
    return audited(tmp_path, "colossal_hybrid", args, ranks=TP, python=PYTHON)


def rank_runs(doc):
    runs = {r["rank"]: r for r in doc["runs"] if r["rank"] is not None}
    assert sorted(runs) == list(range(TP)), doc["runs"]
    assert all(r["audits"] >= 1 and r["world_size"] == TP for r in runs.values()), doc["runs"]
    return runs


def map_entries(tmp_path, run):
    """map_entry refs the probe took from ColossalAI's optimizer wrapper."""
    db = next(tmp_path.glob("*/" + run["file"]))
    with sqlite3.connect("file:%s?mode=ro" % db, uri=True) as con:
        return dict(con.execute("SELECT holder_class, count(*) FROM ref WHERE role = 'map_entry' "
                                "GROUP BY holder_class").fetchall())


@pytest.mark.parametrize("precision,tie", CONFIGS, ids=["-".join(c) for c in CONFIGS])
def test_correct_run_is_clean_on_each_rank(tmp_path, precision, tie):
    doc, gate = run(tmp_path, precision, tie, seed=False)
    assert doc["findings"] == [], [f["message"] for f in doc["findings"]]
    assert gate == 0
    assert_every_audit(doc, 0)
    for r in rank_runs(doc).values():
        maps = map_entries(tmp_path, r)
        if precision == "bf16":  # the fp32 masters paired with the bf16 working params
            assert maps.get("HybridParallelAMPOptimizer", 0) > 0, maps
        else:
            assert maps == {}, maps


@pytest.mark.parametrize("precision,tie", CONFIGS, ids=["-".join(c) for c in CONFIGS])
def test_old_policy_resize_names_the_stale_wte_on_each_rank(tmp_path, precision, tie):
    doc, gate = run(tmp_path, precision, tie, seed=True)
    assert gate == 1
    rank_runs(doc)
    stale_kind = "stale_param" if precision == "fp32" else "stale_map_entry"
    replaced = ["transformer.wte.weight"] + ([] if tie == "tied" else ["lm_head.weight"])
    for rank in range(TP):
        found = [f for f in doc["findings"] if f["rank"] == rank]
        stale = {f["tensor"]["name"].rsplit("module.", 1)[-1]: f for f in found if f["kind"] == stale_kind}
        untrained = {f["tensor"]["name"].rsplit("module.", 1)[-1]: f for f in found
                     if f["kind"] == "untrained_param"}
        assert sorted(stale) == sorted(replaced), [f["message"] for f in found]
        assert sorted(untrained) == sorted(replaced), [f["message"] for f in found]
        assert len(found) == 2 * len(replaced), [f["message"] for f in found]
        assert all(f["tensor"]["device"].startswith(DEVICE) for f in found), [f["tensor"] for f in found]
        for name, f in stale.items():
            assert f["tensor"]["shape"] == [VOCAB, EMBD] and f["tensor"]["dtype"] == "float32", f
            assert f["retained_bytes"] == VOCAB * EMBD * 4, f
            assert f["successor"]["name"].endswith(name) and f["successor"]["local_shape"] == SHARD, f
            assert f["replaced_at"] and any("resize_token_embeddings" in (fr.get("function") or "")
                                            for fr in f["replaced_at"]), f["replaced_at"]
            if precision == "bf16":
                assert f["holder"]["class"] == "HybridParallelAMPOptimizer", f["holder"]
        for f in untrained.values():
            assert f["tensor"]["local_shape"] == SHARD and f["severity"] == "error", f
            assert f["tensor"]["dtype"] == ("float32" if precision == "fp32" else "bfloat16"), f
    assert_every_audit(doc, stale_from(doc, 1))
