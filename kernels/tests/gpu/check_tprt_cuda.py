"""tprt's CUDA backend end to end (run by kernels/scripts/gpu_tprt.sh on a GPU):
the TP=1 loss curve on the GPU against the CPU's (20 steps of the tiny
config, same seed), with the steps replayed as CUDA graphs (TPRT_GRAPH=1:
a failed capture fails the run) and without them (TPRT_GRAPH=0), and the
tpaudit findings of `--device cuda` with the
buggy policy (a stale fp32 master wte on the device, joined to its
cudaMalloc and stack) and the fixed one (nothing).
usage: check_tprt_cuda.py TPRT TPAUDIT OUTDIR   (exit 77 without a GPU)"""
import json
import os
import subprocess
import sys

from tprt_curves import compare_curves, losses

tprt, tpaudit, outdir = sys.argv[1:4]
VOCAB, C = 50257, 64
failed = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        failed.append(what)


def train(*args, env=None):
    r = subprocess.run([tprt, "train", "--steps", "20", *args], capture_output=True, text=True, timeout=600, env=env)
    return r


gpu = train("--device", "cuda", env=dict(os.environ, TPRT_GRAPH="1"))
if gpu.returncode == 2 and "no CUDA device" in gpu.stderr:
    print("skip:", gpu.stderr.strip())
    sys.exit(77)
cpu = train("--device", "cpu")
check(cpu.returncode == 0 and gpu.returncode == 0, f"both train (cpu {cpu.returncode}, cuda {gpu.returncode}) {gpu.stderr[-300:]}")
compare_curves(cpu.stdout, gpu.stdout, "TP=1", check)
eager = train("--device", "cuda", env=dict(os.environ, TPRT_GRAPH="0"))
check(eager.returncode == 0, f"cuda without graphs trains ({eager.returncode}) {eager.stderr[-300:]}")
compare_curves(cpu.stdout, eager.stdout, "TP=1 without CUDA graphs", check)
le, lg = losses(eager.stdout), losses(gpu.stdout)
gap = max(abs(a - b) / abs(a) for a, b in zip(le, lg)) if len(le) == len(lg) == 20 else float("inf")
check(gap < 1e-3, f"CUDA graphs against none: max relative loss difference {gap:.2e} < 1e-3 (the same kernels; "
      "only the order of atomic adds may differ)")


def audited(policy):
    out = os.path.join(outdir, f"audit-cuda-{policy}")
    subprocess.run(["rm", "-rf", out])
    env = dict(os.environ, TPAUDIT_AUDIT="1,2,exit")
    r = subprocess.run([tpaudit, "run", "-o", out, "--", tprt, "train", "--device", "cuda", "--steps", "3",
                        "--policy", policy], capture_output=True, text=True, env=env, timeout=300)
    check(r.returncode == 0, f"tpaudit run --policy {policy} --device cuda: exit {r.returncode} {r.stderr[-400:]}")
    rep = subprocess.run([tpaudit, "report", "--format", "json", out], capture_output=True, text=True, timeout=120)
    check(rep.returncode == 0, f"report {policy}: exit {rep.returncode} {rep.stderr[-300:]}")
    with open(os.path.join(outdir, f"report-cuda-{policy}.json"), "w") as f:
        f.write(rep.stdout)
    return json.loads(rep.stdout) if rep.returncode == 0 else {"findings": None, "runs": []}


doc = audited("buggy")
findings = doc["findings"] or []
for f in findings:
    t = f["tensor"]
    alloc = f.get("allocation")
    print(f"finding {f['kind']} ({f['severity']}): {t['name']} {t['shape']} local {t['local_shape']} {t['dtype']} "
          f"{t['device']} retained {f['retained_bytes']} B; allocation "
          + (f"{alloc['bytes']} B at {alloc['address']:#x}, stack: "
             + " <- ".join(fr.get('function') or '?' for fr in alloc['stack'][:6]) if alloc else "none"))
check(not [f for f in findings if f["kind"] == "stale_param"], "no stale_param: the master is judged on its working side")
stale = [f for f in findings if f["kind"] == "stale_map_entry"]
check(len(stale) == 1, f"one stale_map_entry ({len(stale)})")
if stale:
    s = stale[0]
    check(s["tensor"]["name"] == "transformer.wte.weight" and s["tensor"]["shape"] == [VOCAB, C], "stale working table is wte [50257, 64]")
    elem = 2 if s["tensor"]["dtype"] == "bfloat16" else 4  # the CUDA backend's working copy is bf16
    check(s["retained_bytes"] == VOCAB * C * elem, f"retained {s['retained_bytes']} == 50257*64*{elem}")
    check(s["state_bytes"] == 3 * VOCAB * C * 4, f"master and state {s['state_bytes']} == 3*50257*64*4")
    check(s["tensor"]["device"] == "cuda:0", "stale working table on cuda:0")
    a = s.get("allocation")
    check(bool(a) and a["bytes"] >= VOCAB * C * elem and len(a["stack"]) > 0, "stale table joined to its cudaMalloc with a stack")
for run in doc["runs"]:
    print("run:", {k: run.get(k) for k in ("rank", "inconclusive", "cupti") if k in run})
fixed = audited("fixed")
check(fixed["findings"] == [], f"--policy fixed: no findings ({fixed['findings']})")
print("FAILED:" if failed else "all tprt CUDA checks passed", *failed, sep="\n  " if failed else "")
sys.exit(1 if failed else 0)
