"""torch.compile is unchanged by tpaudit (issue 47): HF GPT-2 (4 layers,
SDPA, bf16 autocast, AdamW) compiled with inductor on the CPU as
torch.compile(model), model.compile(), torch.compile(model.forward), with
mode="max-autotune-no-cudagraphs", with a compiled optimizer step, and
exported with torch.export; FSDP2 + torch.compile on 2 gloo ranks; and the
same model in eager mode with deterministic algorithms.  Each program runs
without and with the shim: its output (dynamo's counters: frames, graph
breaks, recompiles, captured calls, unique graphs; the code of every graph;
the losses as exact float hex) and its stderr must be the same, and every
audit the probe took must be clean and have seen the model."""
import json
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
LIB = os.environ["TPAUDIT_TEST_LIB"]
TPAUDIT = str(Path(LIB).resolve().parents[1] / "bin" / "tpaudit")
# torch's own log lines carry the time and the pid: only those two fields differ
LOG_STAMP = re.compile(r"^([WIE])\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ ", re.M)


def run(tmp_path, argv, probe):
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONUNBUFFERED="1", TOKENIZERS_PARALLELISM="false")
    for var in ("LD_PRELOAD", "TPAUDIT_AUDIT", "TPAUDIT_FAIL_FAST"):
        env.pop(var, None)
    out = tmp_path / ("probe" if probe else "plain")
    out.mkdir()
    if probe:
        env.update(LD_PRELOAD=LIB, TPAUDIT_OUT=str(out))
    r = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=1500, cwd=out)
    assert r.returncode == 0, r.stderr[-4000:]
    return out, r.stdout, LOG_STAMP.sub(r"\1 ", r.stderr)


def twin_runs(tmp_path, argv):
    """(plain stdout, output dir of the probed run) after checking that both
    runs printed the same on stdout and stderr."""
    _, plain, plain_err = run(tmp_path, argv, False)
    if plain.startswith("skip:"):
        pytest.skip(plain.strip())
    out, probed, probed_err = run(tmp_path, argv, True)
    assert probed == plain
    assert probed_err == plain_err
    assert "tpaudit" not in probed_err
    return plain, out


def audits(out):
    """[(db, audit id, label, step, params seen)] of every audit of every database."""
    found = []
    for db in sorted(out.glob("*.db")):
        con = sqlite3.connect(db)
        assert con.execute("select python from run").fetchone()[0] in ("on", "idle: torch not imported"), db
        for aid, label, step in con.execute("select id, label, step from audit where end_ns is not null"):
            params = con.execute("select count(*) from ref where audit_id = ? and role = 'param'", (aid,)).fetchone()[0]
            found.append((db.name, aid, label, step, params))
    return found


def clean_report(out):
    r = subprocess.run([TPAUDIT, "report", "--format", "json", str(out)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["findings"] == [], doc["findings"]
    return doc


def gpt2(case):
    return [sys.executable, str(HERE / "scenarios" / "compile_gpt2.py"), case]


@pytest.mark.parametrize("case", ["eager", "module", "method", "forward", "autotune"])
def test_compiled_model_same_counters_graphs_losses(tmp_path, case):
    plain, out = twin_runs(tmp_path, gpt2(case))
    assert plain.count("losses ") == 1
    if case != "eager":
        assert re.search(r'"unique_graphs": [1-9]', plain), plain  # dynamo compiled something
    seen = audits(out)
    # the default plan: step audits 1 and 2, each of them saw the model
    steps = [(label, step) for _, _, label, step, params in seen if params]
    assert steps[:2] == [("step", 1), ("step", 2)], seen
    assert all(params for _, _, label, _, params in seen if label == "step"), seen
    clean_report(out)


def test_compiled_optimizer_step_same(tmp_path):
    """A compiled optimizer step traces nothing of the probe (its step hook
    folds away under dynamo): the exit audit still sees the model."""
    _, out = twin_runs(tmp_path, gpt2("optimizer"))
    seen = audits(out)
    assert [(label, step) for _, _, label, step, params in seen if params] == [("exit", -1)], seen
    clean_report(out)


def test_export_same_graph(tmp_path):
    plain, out = twin_runs(tmp_path, gpt2("export"))
    assert plain.startswith("export "), plain
    audits(out)


def test_fsdp2_compile_same_on_each_rank(tmp_path):
    argv = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
            str(HERE / "scenarios" / "compile_fsdp2.py")]
    plain, out = twin_runs(tmp_path, argv)
    assert sorted(line.split()[0] for line in plain.splitlines() if " losses " in line) == ["0", "1"], plain
    seen = audits(out)
    ranks = {db for db, _, label, step, params in seen if label == "step" and params}
    assert len(ranks) == 2, seen  # each rank audited its steps and saw its shard of the model
    clean_report(out)
