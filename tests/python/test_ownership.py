"""Probe scenarios end to end: each runs unmodified under `tpaudit run`, the
test reads the recorded rows and the analyzer's JSON report.  Every buggy
order has a twin in the correct order that must report nothing stale.
Distributed cases run 2 gloo ranks through torchrun on the CPU."""
import importlib
import importlib.util
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from audit_points import assert_every_audit, stale_from

HERE = Path(__file__).resolve().parent
SCEN = HERE / "scenarios" / "ownership.py"
LIB = os.environ["TPAUDIT_TEST_LIB"]
TPAUDIT = str(Path(LIB).parents[1] / "bin" / "tpaudit")
# Scenarios that need a torch newer than the torch matrix's oldest row (docs/CI.md).
def _fully_shard_runs_on_cpu():
    """fully_shard is torch 2.6+; on gloo CPU ranks its all-gather records an
    event on a CPU stream (torch.cpu.Stream.record_event), which 2.6 lacks."""
    if importlib.util.find_spec("torch") is None:
        return False
    import torch
    return hasattr(importlib.import_module("torch.distributed.fsdp"), "fully_shard") and \
        hasattr(torch.cpu.Stream, "record_event")


needs_fully_shard = pytest.mark.skipif(
    not _fully_shard_runs_on_cpu(),
    reason="FSDP2 on CPU ranks needs torch.distributed.fsdp.fully_shard (2.6+) and torch.cpu.Stream.record_event (not in 2.6)")


def _named_params_accepted():
    import torch
    try:
        torch.optim.SGD([("w", torch.zeros(1, requires_grad=True))], lr=0.1)
    except TypeError:
        return False
    return True


needs_named_params = pytest.mark.skipif(not _named_params_accepted(),
                                        reason="this torch's optimizers take no named parameters")
RUN_SUMMARY = ("tpaudit: verdict:", "tpaudit: next:")  # the lines `tpaudit run` ends with


def audited(tmp_path, name, argv, env=None, check=True):
    out = tmp_path / name
    e = dict(os.environ, TPAUDIT_AUDIT="1,2")
    e.update(env or {})
    r = subprocess.run([TPAUDIT, "run", "-o", str(out), "--", *argv], env=e, capture_output=True, text=True)
    if check:
        assert r.returncode == 0, r.stdout + r.stderr
    return out, r


def report(out):
    r = subprocess.run([TPAUDIT, "report", "--format", "json", str(out)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def scenario(tmp_path, case, twin=False, ranks=0):
    argv = [sys.executable]
    if ranks:
        argv += ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(ranks)]
    argv += [str(SCEN), case] + (["--twin"] if twin else [])
    return report(audited(tmp_path, case + ("-twin" if twin else ""), argv)[0])


def by_kind(doc, kind, rank=None):
    return {f["tensor"]["name"]: f for f in doc["findings"]
            if f["kind"] == kind and (rank is None or f["rank"] == rank)}


def dbs(out):
    return [sqlite3.connect(p) for p in sorted(out.glob("*.db"))]


def test_hf_gpt2_resize_after_optimizer(tmp_path):
    doc = scenario(tmp_path, "hf_resize")
    stale = by_kind(doc, "stale_param")
    f = stale["lm_head.weight"]
    assert f["tensor"]["shape"] == [50257, 32] and f["retained_bytes"] == 50257 * 32 * 4
    assert f["successor"]["shape"] == [50260, 32] and f["has_grad"] is False
    assert any(fr["file"].endswith("ownership.py") and fr["function"] == "hf_resize" for fr in f["replaced_at"])
    assert by_kind(doc, "untrained_param")["lm_head.weight"]["severity"] == "error"
    assert_every_audit(doc, stale_from(doc, 1), steps=[1, 2])
    twin = scenario(tmp_path, "hf_resize", twin=True)
    assert twin["findings"] == []
    assert_every_audit(twin, 0, steps=[1, 2])


def test_meta_init_then_to_empty(tmp_path):
    doc = scenario(tmp_path, "meta_to_empty")
    stale = by_kind(doc, "stale_param")
    assert set(stale) == {"0.weight", "0.bias", "2.weight", "2.bias"}
    assert all(f["retained_bytes"] == 0 and f["tensor"]["device"] == "meta" for f in stale.values())
    assert_every_audit(doc, 0, steps=[1, 2])  # meta storage: nothing retained at any step
    twin = scenario(tmp_path, "meta_to_empty", twin=True)
    assert twin["findings"] == []
    assert_every_audit(twin, 0, steps=[1, 2])


@pytest.mark.parametrize("case", ["tied", "frozen", "data_pad"])
def test_clean_cases_record_nothing_stale(tmp_path, case):
    doc = scenario(tmp_path, case)
    assert doc["findings"] == [], doc["findings"]
    assert all(r["audits"] >= 2 and not r["inconclusive"] for r in doc["runs"])
    assert_every_audit(doc, 0, steps=[1, 2])


def test_tensors_are_freed_with_probe_active(tmp_path):
    out, r = audited(tmp_path, "gc", [sys.executable, str(SCEN), "gc_freed"])
    assert "gc_freed: 0 of 18 objects alive" in r.stdout
    (con,) = dbs(out)
    assert con.execute("select count(*) from audit where end_ns is not null").fetchone()[0] >= 2


def test_an_optimizer_at_a_dead_ones_address_is_audited_at_its_own_steps(tmp_path):
    out, r = audited(tmp_path, "reused", [sys.executable, str(SCEN), "reused_address"])
    made = int(r.stdout.split("reused_address: ")[1].split()[0])
    assert "the last at a dead one's address: True" in r.stdout, r.stdout
    (con,) = dbs(out)
    steps = con.execute("select step, count(*) from audit where label = 'step' and end_ns is not null "
                        "group by step order by step").fetchall()
    assert steps == [(1, made), (2, made)]  # the last one too: it took no step count of the dead one's


def test_spawn_child_is_audited(tmp_path):
    out, _ = audited(tmp_path, "spawn", [sys.executable, str(SCEN), "spawn_child"])
    doc = report(out)
    assert len(doc["runs"]) >= 2  # parent, spawned child (and the resource tracker)
    assert set(by_kind(doc, "stale_param")) == {"2.weight", "2.bias"}
    assert not any(r["inconclusive"] for r in doc["runs"])
    assert_every_audit(doc, stale_from(doc, 1), steps=[1, 2])  # the child; the parent took no step audit


def test_python_dash_m_module(tmp_path):
    out = tmp_path / "dashm"
    e = dict(os.environ, TPAUDIT_AUDIT="1,2", PYTHONPATH=str(HERE / "scenarios"))
    r = subprocess.run([TPAUDIT, "run", "-o", str(out), "--", sys.executable, "-m", "seed_embedding"],
                       env=e, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    doc = report(out)
    assert set(by_kind(doc, "stale_param")) == {"wte.weight"}
    assert_every_audit(doc, stale_from(doc, 1), steps=[1, 2])


@needs_fully_shard
def test_dtensor_parallelize_module_two_ranks(tmp_path):
    doc = scenario(tmp_path, "dtensor_tp", ranks=2)
    for rank in (0, 1):
        stale = by_kind(doc, "stale_param", rank)
        assert set(stale) == {"0.weight", "0.bias", "2.weight", "2.bias"}
        assert stale["0.weight"]["tensor"]["shape"] == [32, 16]
        assert stale["0.weight"]["retained_bytes"] == 32 * 16 * 4
        assert stale["0.weight"]["successor"]["local_shape"] == [16, 16]  # Colwise: dim 0 split
        assert stale["2.weight"]["successor"]["local_shape"] == [16, 16]  # Rowwise: dim 1 split
        assert stale["2.bias"]["retained_bytes"] == 0  # replicated bias shares the old storage
        assert set(by_kind(doc, "untrained_param", rank)) == set(stale)
    assert sorted(r["rank"] for r in doc["runs"] if r["rank"] is not None) == [0, 1]
    assert {r["world_size"] for r in doc["runs"] if r["rank"] is not None} == {2}
    assert_every_audit(doc, stale_from(doc, 1), steps=[1, 2])
    twin = scenario(tmp_path, "dtensor_tp", twin=True, ranks=2)
    assert twin["findings"] == []
    assert_every_audit(twin, 0, steps=[1, 2])


@needs_fully_shard
def test_fsdp2_fully_shard_two_ranks(tmp_path):
    doc = scenario(tmp_path, "fsdp2", ranks=2)
    for rank in (0, 1):
        stale = by_kind(doc, "stale_param", rank)
        assert set(stale) == {"0.weight", "0.bias", "2.weight", "2.bias"}
        assert stale["0.weight"]["successor"]["local_shape"] == [16, 16]
        assert stale["0.weight"]["successor"]["shape"] == [32, 16]
        assert sum(f["retained_bytes"] for f in stale.values()) == (32 * 16 + 32 + 16 * 32 + 16) * 4
    assert_every_audit(doc, (32 * 16 + 32 + 16 * 32 + 16) * 4, steps=[1, 2])
    twin = scenario(tmp_path, "fsdp2", twin=True, ranks=2)
    assert twin["findings"] == []
    assert_every_audit(twin, 0, steps=[1, 2])


@needs_fully_shard
def test_adagrad_orphan_state_after_fully_shard(tmp_path):
    doc = scenario(tmp_path, "adagrad_fsdp", ranks=2)
    for rank in (0, 1):
        orphans = by_kind(doc, "orphan_state", rank)
        assert {"0.weight.sum", "0.bias.sum", "2.weight.sum", "2.bias.sum"} <= set(orphans)
        assert orphans["0.weight.sum"]["retained_bytes"] == 32 * 16 * 4
        assert not by_kind(doc, "stale_param", rank)
    assert_every_audit(doc, stale_from(doc, 1), steps=[1])  # Adagrad's step 1 fails on the missing state
    twin = scenario(tmp_path, "adagrad_fsdp", twin=True, ranks=2)
    assert twin["findings"] == []
    assert_every_audit(twin, 0, steps=[1, 2])


@pytest.mark.parametrize("case", ["ddp_before", "ddp_after"])
def test_ddp_either_order_is_clean(tmp_path, case):
    doc = scenario(tmp_path, case, ranks=2)
    assert doc["findings"] == []
    assert sum(1 for r in doc["runs"] if r["rank"] is not None and r["audits"] >= 2) == 2
    assert_every_audit(doc, 0, steps=[1, 2])


def test_user_sitecustomize_still_runs(tmp_path):
    site = tmp_path / "usersite"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import os\nos.environ['USER_SITE_RAN'] = 'yes'\n")
    code = "import os, torch; print(os.environ.get('USER_SITE_RAN'))"
    out, r = audited(tmp_path, "site", [sys.executable, "-c", code], env={"PYTHONPATH": str(site)})
    assert r.stdout.strip() == "yes"
    (con,) = dbs(out)
    assert con.execute("select python from run").fetchone()[0] == "on"


def test_program_without_torch_is_unaffected(tmp_path):
    code = "import sys; print('hello'); print('torch' in sys.modules)"
    out, r = audited(tmp_path, "plain", [sys.executable, "-c", code])
    assert r.stdout == "hello\nFalse\n"
    assert not [l for l in r.stderr.splitlines() if l.startswith("tpaudit:") and not l.startswith(RUN_SUMMARY)]
    # A process that never imported torch and recorded nothing leaves no database.
    assert dbs(out) == []


@pytest.mark.parametrize("how,flag,env,value", [
    ("isolated", ["-I"], {}, "off: -I/-E"),
    ("env-off", [], {"TPAUDIT_PYTHON": "off"}, "off: TPAUDIT_PYTHON=off"),
])
def test_probe_off_says_so_once_and_run_goes_on(tmp_path, how, flag, env, value):
    out, r = audited(tmp_path, how, [sys.executable, *flag, "-c", "print(6 * 7)"], env=env)
    assert r.stdout == "42\n"
    lines = [l for l in r.stderr.splitlines() if l.startswith("tpaudit:") and not l.startswith(RUN_SUMMARY)]
    assert len(lines) == 1 and "ownership probe off" in lines[0], r.stderr
    (con,) = dbs(out)
    assert con.execute("select python from run").fetchone()[0] == value


def test_stale_tensor_has_its_creation_stack(tmp_path):
    doc = scenario(tmp_path, "hf_resize")
    created = by_kind(doc, "stale_param")["lm_head.weight"]["created_at"]
    assert any(fr["file"].endswith("ownership.py") and fr["function"] == "gpt2" for fr in created), created
    assert_every_audit(doc, stale_from(doc, 1), steps=[1, 2])


def test_probe_does_not_change_numerics(tmp_path):
    plain = subprocess.run([sys.executable, str(SCEN), "numerics"], capture_output=True, text=True, check=True)
    _, audited_run = audited(tmp_path, "numerics", [sys.executable, str(SCEN), "numerics"],
                             env={"TPAUDIT_AUDIT": "1,2,3,4,5"})
    assert audited_run.stdout == plain.stdout and len(plain.stdout.split()) == 5


def test_exception_in_hook_turns_probe_off_once(tmp_path):
    out, r = audited(tmp_path, "boom", [sys.executable, str(SCEN), "hook_error"], env={"TPAUDIT_AUDIT": "1,2,3,exit"})
    assert "training finished" in r.stdout
    lines = [l for l in r.stderr.splitlines() if l.startswith("tpaudit:") and not l.startswith(RUN_SUMMARY)]
    assert len(lines) == 1 and "python probe off after an internal error" in lines[0], r.stderr
    (con,) = dbs(out)
    assert con.execute("select python from run").fetchone()[0] == "off: internal error"


def test_explicit_audit_without_preload(tmp_path):
    probe_dir = Path(LIB).parents[1] / "share" / "tpaudit" / "python"
    env = dict(os.environ, PYTHONPATH=str(probe_dir), TPAUDIT_OUT=str(tmp_path / "explicit"))
    env.pop("LD_PRELOAD", None)
    r = subprocess.run([sys.executable, str(SCEN), "explicit"], env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("found ['2.bias', '2.weight']"), r.stdout  # what tpaudit.audit() returns
    doc = report(tmp_path / "explicit")
    assert set(by_kind(doc, "stale_param")) == {"2.weight", "2.bias"}
    assert doc["runs"][0]["audit_points"] == [{"step": -1, "stale_bytes": (16 * 32 + 16) * 4}]  # its one audit


@needs_named_params
def test_optimizer_built_from_named_parameters(tmp_path):
    out, _ = audited(tmp_path, "named", [sys.executable, str(SCEN), "named_params"])
    (con,) = dbs(out)
    detail, stack = con.execute("select detail, py_stack from event where kind='optimizer_created'").fetchone()
    assert detail == "0.weight,0.bias,2.weight,2.bias"
    assert any(l.endswith(":named_params") and "ownership.py" in l for l in stack.splitlines()), stack
    doc = report(out)
    assert set(by_kind(doc, "stale_param")) == {"0.weight", "0.bias"}
    assert_every_audit(doc, (32 * 16 + 32) * 4, steps=[1, 2])


def test_stale_param_counts_its_optimizer_state(tmp_path):
    out, _ = audited(tmp_path, "state", [sys.executable, str(SCEN), "stale_with_state"], env={"TPAUDIT_AUDIT": "1,2,3"})
    doc = report(out)
    stale = by_kind(doc, "stale_param")
    assert stale["2.weight"]["retained_bytes"] == 16 * 32 * 4
    assert stale["2.weight"]["state_bytes"] >= 2 * 16 * 32 * 4  # exp_avg and exp_avg_sq (and step)
    assert doc["totals"]["state_bytes"] == sum(f["state_bytes"] for f in doc["findings"])
    assert "of its optimizer state" in stale["2.weight"]["message"]
    stale_then = (16 * 32 + 16) * 4  # replaced after step 1: stale from the audit at step 2 on
    assert doc["runs"][0]["audit_points"] == [{"step": 1, "stale_bytes": 0}, {"step": 2, "stale_bytes": stale_then},
                                              {"step": 3, "stale_bytes": stale_then}]
    twin, _ = audited(tmp_path, "state-twin", [sys.executable, str(SCEN), "stale_with_state", "--twin"],
                      env={"TPAUDIT_AUDIT": "1,2,3"})
    twin_doc = report(twin)
    assert twin_doc["findings"] == []
    assert_every_audit(twin_doc, 0, steps=[1, 2, 3])
