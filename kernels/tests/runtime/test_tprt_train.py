"""End-to-end tests of the tprt CLI (bin/tprt): TP=1, 2 and 4 train the
same loss curve, the loss goes down, bad options give one "tprt:" line and
exit 2, a killed rank stops the others and the parent exits non-zero, and
under `tpaudit run` the buggy policy gives a stale embedding (and an
untrained live shard) on every rank while the fixed policy gives nothing.
Needs TPRT_BIN (the tprt binary) and TPAUDIT_EXE (the tpaudit CLI) in the environment."""
import json
import ctypes
import os
import shutil
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

TPRT = os.environ["TPRT_BIN"]
TPAUDIT = os.environ["TPAUDIT_EXE"]
VOCAB, C = 50257, 64  # the tiny model
SMALL = ["--model", "tiny", "--batch", "2", "--seq", "16", "--seed", "1"]
STEP = re.compile(r"^step (\d+) loss (\d+\.\d{6}) tokens/s (\d+)$")


def train(*args, timeout=120):
    return subprocess.run([TPRT, "train", *SMALL, *map(str, args)], capture_output=True, text=True, timeout=timeout)


def losses(stdout):
    lines = stdout.splitlines()
    got = [STEP.match(line) for line in lines]
    assert all(got), lines
    return [float(m.group(2)) for m in got]


@pytest.fixture(scope="module")
def curves():
    out = {}
    for tp in (1, 2, 4):
        r = train("--tp", tp, "--steps", 20, "--lr", "3e-3", "--policy", "fixed")
        assert r.returncode == 0, r.stderr
        out[tp] = losses(r.stdout)
        assert len(out[tp]) == 20
    return out


@pytest.mark.parametrize("tp", [2, 4])
def test_tp_degrees_give_the_same_curve(curves, tp):
    for step, (a, b) in enumerate(zip(curves[1], curves[tp]), 1):
        assert abs(a - b) <= 3e-4 * abs(a), f"step {step}: tp1 {a} tp{tp} {b}"


def test_loss_decreases(curves):
    first, last = curves[1][:5], curves[1][-5:]
    assert curves[1][0] == pytest.approx(10.8, abs=0.1)  # ~ln(50257) at init
    assert sum(last) / 5 < sum(first) / 5 - 0.3, curves[1]


@pytest.mark.parametrize("args", [
    ["--tp", "3"],                 # does not divide the 4 heads
    ["--tp", "8"],                 # more ranks than heads
    ["--model", "gpt3"],
    ["--bogus", "1"],
    ["--steps", "ten"],
    ["--policy", "clever"],
    ["--seq", "65"],               # longer than wpe
    ["--device", "tpu"],           # no such backend
    ["--tp"],                      # missing value
])
def test_bad_options_exit_2_with_one_line(args):
    r = subprocess.run([TPRT, "train", *args], capture_output=True, text=True, timeout=30)
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("tprt: "), r.stderr
    assert r.stdout == ""


def has_gpu():
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    return subprocess.run(["nvidia-smi", "-L"], capture_output=True).returncode == 0 if shutil.which("nvidia-smi") else False


def test_cuda_without_a_gpu_is_one_clear_line():
    if has_gpu():
        pytest.skip("this machine has a GPU: --device cuda trains (kernels/scripts/gpu_tprt.sh checks it)")
    r = subprocess.run([TPRT, "train", "--device", "cuda"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("tprt: --device cuda: "), r.stderr
    assert "no CUDA backend" in lines[0] or "no CUDA device" in lines[0]


def children_of(pid):
    kids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        if int(fields[1]) == pid:
            kids.append(int(entry.name))
    return sorted(kids)


def test_killed_rank_stops_the_others():
    p = subprocess.Popen([TPRT, "train", *SMALL, "--tp", "4", "--steps", "100000", "--timeout", "20"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert STEP.match(p.stdout.readline().strip())  # training is under way
        kids = children_of(p.pid)
        assert len(kids) == 3, kids
        os.kill(kids[1], signal.SIGKILL)
        start = time.monotonic()
        _, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 1, err
    assert time.monotonic() - start < 15
    assert "killed by signal 9" in err and "training aborted" in err, err
    assert all(not Path(f"/proc/{k}").exists() for k in kids)


def audited(tmp_path, policy):
    out = tmp_path / policy
    env = dict(os.environ, TPAUDIT_AUDIT="1,2,exit")
    r = subprocess.run([TPAUDIT, "run", "-o", out, "--", TPRT, "train", *SMALL, "--tp", "2", "--steps", "3",
                        "--policy", policy], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    assert len(losses(r.stdout)) == 3
    rep = subprocess.run([TPAUDIT, "report", "--format", "json", out], capture_output=True, text=True, timeout=60)
    assert rep.returncode == 0, rep.stderr
    doc = json.loads(rep.stdout)
    assert sorted(run["rank"] for run in doc["runs"]) == [0, 1]
    assert not any(run["inconclusive"] for run in doc["runs"])
    return doc


def test_buggy_policy_leaves_a_stale_embedding_on_every_rank(tmp_path):
    doc = audited(tmp_path, "buggy")
    for rank in (0, 1):
        mine = [f for f in doc["findings"] if f["rank"] == rank]
        # The master is judged on its working side: one finding for the old
        # working table, its fp32 master and AdamW state counted with it.
        assert not [f for f in mine if f["kind"] == "stale_param"], mine
        stale = [f for f in mine if f["kind"] == "stale_map_entry"]
        assert len(stale) == 1, mine
        s = stale[0]
        assert s["tensor"]["name"] == "transformer.wte.weight" and s["tensor"]["shape"] == [VOCAB, C]
        assert s["retained_bytes"] == VOCAB * C * 4
        assert s["state_bytes"] == 3 * VOCAB * C * 4  # fp32 master, exp_avg, exp_avg_sq
        assert s["holder"]["kind"] == "wrapper" and s["severity"] == "error"
        assert s["successor"]["shape"] == [VOCAB + 1, C] and s["successor"]["local_shape"] == [(VOCAB + 1) // 2, C]
        assert "2-way shard of dim 0" in s["successor"]["relation"] and "50257 -> 50258" in s["successor"]["relation"]
        untrained = [f for f in mine if f["kind"] == "untrained_param"]
        assert len(untrained) == 1 and untrained[0]["severity"] == "error"
        assert untrained[0]["tensor"]["local_shape"] == [(VOCAB + 1) // 2, C] and untrained[0]["has_grad"]


def test_fixed_policy_reports_nothing(tmp_path):
    assert audited(tmp_path, "fixed")["findings"] == []
