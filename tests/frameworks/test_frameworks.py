"""Real frameworks under `tpaudit run`, on the CPU: each correct run must be
clean, pass the gate and have audited; each seeded run (a module replaced
after the framework built its optimizer) must name the stale tensor, its
bytes and its live successor.  Every audit point of each run is checked too,
not only the judged one.  The rows of docs/FRAMEWORKS.md's CPU table."""
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "python"))
from audit_points import assert_every_audit, stale_from  # noqa: E402
LIB = os.environ["TPAUDIT_TEST_LIB"]
TPAUDIT = str(Path(LIB).parents[1] / "bin" / "tpaudit")
ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
       "OMP_NUM_THREADS": "1", "DS_ACCELERATOR": "cpu", "PYTHONWARNINGS": "ignore"}


def audited(tmp_path, script, args, ranks=0, python=sys.executable):
    name = "-".join([script] + [a.strip("-") for a in args])
    out = tmp_path / name
    argv = [python]
    if ranks:
        argv += ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(ranks)]
    argv += [str(HERE / "scenarios" / (script + ".py")), *args]
    env = dict(os.environ, **ENV)
    r = subprocess.run([TPAUDIT, "run", "-o", str(out), "--", *argv], env=env, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    rep = subprocess.run([TPAUDIT, "report", "--format", "json", str(out)], capture_output=True, text=True)
    assert rep.returncode == 0, rep.stderr
    gate = subprocess.run([TPAUDIT, "gate", str(out)], capture_output=True, text=True)
    return json.loads(rep.stdout), gate.returncode


def assert_clean(doc, gate):
    assert doc["findings"] == [], [f["message"] for f in doc["findings"]]
    assert any(r["audits"] >= 1 for r in doc["runs"]), doc["runs"]
    assert gate == 0
    assert_every_audit(doc, 0)


def assert_seeded(doc, gate, name_part, first_step=1):
    """Named at the judged audit, and stale at every audit from first_step
    (the first step audit after the replacement) on."""
    stale = [f for f in doc["findings"] if f["kind"] in ("stale_param", "stale_map_entry")]
    assert stale, [f["message"] for f in doc["findings"]]
    named = [f for f in stale if name_part in (f["tensor"]["name"] or "")]
    assert named, [f["message"] for f in stale]
    assert all(f["tensor"]["name"] and "(unnamed)" not in f["message"] for f in stale)
    assert all(f["retained_bytes"] > 0 and f["successor"] for f in named), [f["message"] for f in named]
    assert gate == 1
    assert_every_audit(doc, stale_from(doc, first_step))


CASES = [  # (script, case, ranks, name of the replaced module's tensor)
    ("cases", "colossal_style", 0, "0.weight"),
    ("cases", "compiled_orig_mod", 0, "2.weight"),
    ("cases", "ddp_module", 1, "0.weight"),
    ("cases", "zero_redundancy", 2, "0.weight"),
    ("cases", "peft_lora", 0, "lora_A.default.weight"),
    ("cases", "hf_trainer", 0, "h.0.mlp.c_fc.weight"),
    ("cases", "lightning_single", 0, "net.0.weight"),
    ("cases", "lightning_ddp", 0, "net.0.weight"),
    ("cases", "accelerate_fsdp2", 2, "2.weight"),
    ("deepspeed_zero", "0", 1, "0.weight"),
    ("deepspeed_zero", "1", 1, "0.weight"),
    ("deepspeed_zero", "2", 1, "0.weight"),
    ("deepspeed_zero", "3", 1, "0.weight"),
]


@pytest.mark.parametrize("script,case,ranks,stale", CASES, ids=["%s-%s" % c[:2] for c in CASES])
def test_correct_run_is_clean(tmp_path, script, case, ranks, stale):
    assert_clean(*audited(tmp_path, script, [case], ranks))


# A plain module swapped in under FSDP2 (accelerate) or ZeRO-3 makes the program
# itself fail (FSDP2's hooks; DeepSpeed: no attribute 'ds_active_sub_modules').
SEEDED = [c for c in CASES if c[1] not in ("accelerate_fsdp2", "3")]


# The step of the first audit after the replacement (1 unless named here): DDP's
# case trains a step first; DeepSpeed's ZeRO-0 bf16 wrapper takes its step 1 (a
# dummy step) inside deepspeed.initialize, before the replacement.
FIRST_STALE_STEP = {("cases", "ddp_module"): 2, ("deepspeed_zero", "0"): 2}


@pytest.mark.parametrize("script,case,ranks,stale", SEEDED, ids=["%s-%s" % c[:2] for c in SEEDED])
def test_seeded_run_names_the_stale_tensor(tmp_path, script, case, ranks, stale):
    assert_seeded(*audited(tmp_path, script, [case, "--seed"], ranks), stale, FIRST_STALE_STEP.get((script, case), 1))


def test_fsdp2_unsharded_at_step_is_the_model(tmp_path):
    assert_clean(*audited(tmp_path, "cases", ["fsdp2_unsharded_at_step"], 2))


needs_torchao = pytest.mark.skipif(importlib.util.find_spec("torchao") is None,
                                   reason="torchao is not installed (requirements.lock pins it)")
FLOAT8_WEIGHTS = {"0.weight": [512, 256], "2.weight": [256, 512]}


@needs_torchao
def test_torchao_float8_converted_before_the_optimizer_is_clean(tmp_path):
    assert_clean(*audited(tmp_path, "cases", ["torchao_float8"]))


@needs_torchao
def test_torchao_float8_converted_after_the_optimizer(tmp_path):
    """Each Linear weight becomes a Parameter of a WeightWithDynamicFloat8CastTensor
    wrapping the very Parameter the AdamW holds: stale (never trained again),
    but its storage is the live model's, so it retains 0 B at every audit;
    the live tensor is shown with its own class."""
    doc, gate = audited(tmp_path, "cases", ["torchao_float8", "--seed"])
    assert gate == 1
    stale = {f["tensor"]["name"]: f for f in doc["findings"] if f["kind"] == "stale_param"}
    untrained = {f["tensor"]["name"]: f for f in doc["findings"] if f["kind"] == "untrained_param"}
    assert len(doc["findings"]) == 4 and sorted(stale) == sorted(untrained) == sorted(FLOAT8_WEIGHTS), \
        [f["message"] for f in doc["findings"]]
    for name, shape in FLOAT8_WEIGHTS.items():
        assert stale[name]["tensor"]["shape"] == shape and stale[name]["tensor"]["type"] == "Parameter"
        assert stale[name]["retained_bytes"] == 0 and stale[name]["severity"] == "error", stale[name]
        assert stale[name]["successor"]["name"] == name, stale[name]
        assert untrained[name]["tensor"]["type"] == "WeightWithDynamicFloat8CastTensor", untrained[name]
        assert untrained[name]["severity"] == "error", untrained[name]
    assert_every_audit(doc, 0, steps=[1, 2])
