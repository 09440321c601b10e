"""Runs alloc_probe under the shim and checks the database: every printed
allocation appears as an alloc row with its exact address and bytes, each
is freed, and the allocating API calls carry native stacks. Exit 77 (skip)
without a GPU."""
import glob
import os
import sqlite3
import subprocess
import sys
import tempfile

import ctypes

try:
    ctypes.CDLL("libcuda.so.1")
except OSError:
    print("skip: no NVIDIA driver (libcuda.so.1) on this machine; GPU tests run through scripts/gpu_all.sh")
    sys.exit(77)
probe, shim = sys.argv[1], sys.argv[2]
out = tempfile.mkdtemp()
env = dict(os.environ, LD_PRELOAD=shim, TPAUDIT_OUT=out)
mode = sys.argv[3] if len(sys.argv) > 3 else "preload"
if mode == "injection":
    env.pop("LD_PRELOAD")
    env["CUDA_INJECTION64_PATH"] = shim
r = subprocess.run([probe], capture_output=True, text=True, env=env)
print(r.stdout, r.stderr)
if r.returncode == 77:
    print("skip: no CUDA device on this machine (GPU tests run through scripts/gpu_all.sh)")
    sys.exit(77)
assert r.returncode == 0
(db,) = glob.glob(out + "/*.db")
c = sqlite3.connect(db)
print("run:", c.execute("select cupti, complete, cupti_dropped from run").fetchone())
assert c.execute("select cupti from run").fetchone()[0] == "on"
printed = [line.split() for line in r.stdout.splitlines() if line.startswith("ALLOC")]
rows = c.execute("select address, bytes, memkind, correlation from alloc where op='alloc' and source='cupti'").fetchall()
by_addr = {a & (2**64 - 1): (b, k, corr) for a, b, k, corr in rows}
for _, kind, addr, size in printed:
    a = int(addr, 16)
    assert a in by_addr, (kind, addr, "missing")
    assert by_addr[a][0] == int(size), (kind, addr, by_addr[a])
    print(f"ok {kind:7s} {addr} {size} memkind={by_addr[a][1]}")
frees = {a & (2**64 - 1) for (a,) in c.execute("select address from alloc where op='free'")}
assert all(int(addr, 16) in frees for _, _, addr, _ in printed), "missing free rows"
stacks = c.execute("select count(*) from api_call where stack_id is not null").fetchone()[0]
print("api calls with stacks:", stacks, c.execute("select group_concat(distinct api) from api_call").fetchone()[0])
assert stacks >= len(printed)
import json
tpaudit_bin = sys.argv[4]
doc = json.loads(subprocess.run([tpaudit_bin, "report", "--format", "json", out], capture_output=True, text=True, check=True).stdout)
(stale,) = [f for f in doc["findings"] if f["kind"] == "stale_param"]
alloc = stale["allocation"]
print("stale tensor allocation:", alloc["address"], alloc["bytes"], [fr.get("function") for fr in alloc["stack"]][:8])
assert alloc["bytes"] == 64 << 20
assert any(fr.get("function") == "allocate_with_runtime" for fr in alloc["stack"]), alloc["stack"]
print("PASS", mode, len(printed), "allocations")
