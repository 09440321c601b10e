"""tprt's device path at TP=2 (run by kernels/scripts/gpu_tprt.sh): with >= 2 GPUs,
the GPU TP=2 loss curve against the CPU TP=2 one (20 steps of the tiny
config), the buggy policy under `tpaudit run` (the stale fp32 master wte on
the device of each rank), the fixed policy (nothing), and a rank killed
mid-training (the others abort their NCCL communicator, exit 1, no hang).
With 1 GPU: prints "skip: needs 2 GPUs", checks the one-line refusal, then
runs the same checks as notes (never failing) with TPRT_ALLOW_SHARED_GPU=1:
both ranks on the one GPU, each with its own NCCL_HOSTID (loopback sockets).
usage: check_tprt_tp.py TPRT TPAUDIT OUTDIR   (exit 77 without a GPU)"""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tprt_curves import compare_curves

tprt, tpaudit, outdir = sys.argv[1:4]
VOCAB, C = 50257, 64
failed = []
strict = True  # False: shared-GPU notes that never fail the run


def check(ok, what):
    print(("ok   " if ok else ("FAIL " if strict else "note: not ok ")) + what, flush=True)
    if not ok and strict:
        failed.append(what)


def gpu_count():
    try:
        r = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return 0
    return sum(1 for line in r.stdout.splitlines() if line.startswith("GPU "))


def train(device, *args, env=None, timeout=300):
    cmd = [tprt, "train", "--tp", "2", "--device", device, "--steps", "20", "--timeout", "30", *args]
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired as e:
        return subprocess.CompletedProcess(cmd, 124, e.stdout or "", f"timed out after {timeout} s (a hang)")


def loss_curve(env):
    gpu, cpu = train("cuda", env=env), train("cpu")
    check(cpu.returncode == 0 and gpu.returncode == 0,
          f"TP=2 trains on both (cpu {cpu.returncode}, cuda {gpu.returncode}) {gpu.stderr[-400:]}")
    compare_curves(cpu.stdout, gpu.stdout, "TP=2", check)
    return gpu.returncode == 0


def audited(policy, env):
    out = os.path.join(outdir, f"audit-cuda-tp2-{policy}")
    subprocess.run(["rm", "-rf", out])
    env = dict(env or os.environ, TPAUDIT_AUDIT="1,2,exit")
    cmd = [tpaudit, "run", "-o", out, "--", tprt, "train", "--device", "cuda", "--tp", "2", "--steps", "3",
           "--timeout", "30", "--policy", policy]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    except subprocess.TimeoutExpired:
        check(False, f"tpaudit run --tp 2 --policy {policy} --device cuda: timed out")
        return {"findings": None, "runs": []}
    check(r.returncode == 0, f"tpaudit run --tp 2 --policy {policy} --device cuda: exit {r.returncode} {r.stderr[-400:]}")
    rep = subprocess.run([tpaudit, "report", "--format", "json", out], capture_output=True, text=True, timeout=120)
    check(rep.returncode == 0, f"report {policy}: exit {rep.returncode} {rep.stderr[-300:]}")
    with open(os.path.join(outdir, f"report-cuda-tp2-{policy}.json"), "w") as f:
        f.write(rep.stdout)
    doc = json.loads(rep.stdout) if rep.returncode == 0 else {"findings": None, "runs": []}
    check(sorted(run.get("rank") for run in doc["runs"]) == [0, 1], f"one run per rank ({len(doc['runs'])})")
    return doc


def audit_checks(env):
    doc = audited("buggy", env)
    findings = doc["findings"] or []
    for rank in (0, 1):
        mine = [f for f in findings if f.get("rank") == rank]
        check(not [f for f in mine if f["kind"] == "stale_param"], f"rank {rank}: no stale_param (master judged on its working side)")
        stale = [f for f in mine if f["kind"] == "stale_map_entry"]
        check(len(stale) == 1, f"rank {rank}: one stale_map_entry ({len(stale)})")
        if stale:
            t, a = stale[0]["tensor"], stale[0].get("allocation")
            print(f"rank {rank}: stale_map_entry {t['name']} {t['shape']} {t['dtype']} {t['device']} retained "
                  f"{stale[0]['retained_bytes']} B + {stale[0]['state_bytes']} B master and state; allocation "
                  + (f"{a['bytes']} B" if a else "none"))
            check(t["name"] == "transformer.wte.weight" and t["shape"] == [VOCAB, C], f"rank {rank}: stale is wte [50257, 64]")
            elem = 2 if t["dtype"] == "bfloat16" else 4  # the CUDA backend's working copy is bf16
            check(stale[0]["retained_bytes"] == VOCAB * C * elem, f"rank {rank}: retained == 50257*64*{elem}")
            check(stale[0]["state_bytes"] == 3 * VOCAB * C * 4, f"rank {rank}: master and state == 3*50257*64*4")
            check(t["device"].startswith("cuda:"), f"rank {rank}: old table on {t['device']}")
            check(bool(a) and a["bytes"] >= VOCAB * C * elem, f"rank {rank}: joined to its cudaMalloc")
        untrained = [f for f in mine if f["kind"] == "untrained_param"]
        check(len(untrained) == 1 and untrained[0]["tensor"]["local_shape"] == [(VOCAB + 1) // 2, C],
              f"rank {rank}: the live [25129, 64] shard is untrained")
    fixed = audited("fixed", env)
    check(fixed["findings"] == [], f"--policy fixed: no findings ({fixed['findings']})")


def children_of(pid):
    kids = []
    for entry in Path("/proc").iterdir():
        try:
            stat = (entry / "stat").read_text() if entry.name.isdigit() else ""
        except OSError:
            continue
        if stat and int(stat[stat.rindex(")") + 2:].split()[1]) == pid:
            kids.append(int(entry.name))
    return kids


def kill_check(env):
    p = subprocess.Popen([tprt, "train", "--device", "cuda", "--tp", "2", "--steps", "100000", "--timeout", "20"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    start, err = None, ""
    try:
        first = p.stdout.readline()
        kids = children_of(p.pid)
        check(first.startswith("step ") and len(kids) == 1, f"TP=2 under way ({first.strip()!r}, children {kids})")
        if kids:
            os.kill(kids[0], signal.SIGKILL)
        start = time.monotonic()
        _, err = p.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        err = "hang: still running 60 s after the kill"
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    took = time.monotonic() - start if start else -1
    print(f"after SIGKILL of rank 1: exit {p.returncode} in {took:.1f} s; stderr: {err.strip()[-300:]}")
    check(p.returncode == 1 and 0 <= took < 30 and "killed by signal 9" in err, "a killed rank stops rank 0, no hang")


n = gpu_count()
if n < 1:
    print("skip: no GPU")
    sys.exit(77)
env = None
if n < 2:
    print("skip: needs 2 GPUs")
    r = train("cuda", timeout=120)
    lines = r.stderr.strip().splitlines()
    check(r.returncode == 2 and len(lines) == 1 and lines[0].startswith("tprt: --tp 2 needs 2 GPUs, this machine has 1"),
          f"--tp 2 on 1 GPU refused in one line, exit 2 (exit {r.returncode}: {r.stderr.strip()[:300]})")
    print("== TPRT_ALLOW_SHARED_GPU=1: both ranks on the one GPU (notes only)")
    strict, env = False, dict(os.environ, TPRT_ALLOW_SHARED_GPU="1")
if loss_curve(env) or strict:  # shared GPU that does not train: the rest would say nothing new
    audit_checks(env)
    kill_check(env)
print("FAILED:" if failed else "all tprt TP=2 checks passed", *failed, sep="\n  " if failed else "")
sys.exit(1 if failed else 0)
