"""Runs lib_probe under the shim and checks the report's memory by library:
NCCL's and cuBLAS's own device memory is listed under libnccl and libcublas,
the program's 32 MiB table under the program, and the stale-table finding's
allocation is the table's, made in allocate_model_table. Exit 77 (skip)
without a GPU."""
import ctypes
import json
import os
import subprocess
import sys
import tempfile

try:
    ctypes.CDLL("libcuda.so.1")
except OSError:
    print("skip: no NVIDIA driver (libcuda.so.1) on this machine; GPU tests run through scripts/gpu_all.sh")
    sys.exit(77)
probe, shim, tpaudit = sys.argv[1:4]
out = tempfile.mkdtemp()
r = subprocess.run([probe], capture_output=True, text=True, env=dict(os.environ, LD_PRELOAD=shim, TPAUDIT_OUT=out))
print(r.stdout, r.stderr)
if r.returncode == 77:
    sys.exit(77)
assert r.returncode == 0
doc = json.loads(subprocess.run([tpaudit, "report", "--format", "json", out], capture_output=True, text=True, check=True).stdout)
(run,) = doc["runs"]
libs = {m["library"]: m for m in run["memory_by_library"]}
for name, m in libs.items():
    print(f"  {name:32s} {m['bytes']:>12d} B in {m['allocations']} allocations")
owner = lambda prefix: sum(m["bytes"] for n, m in libs.items() if n.startswith(prefix))
assert owner("libnccl") > 0, "NCCL's memory not attributed to libnccl"
assert owner("libcublas") > 0, "cuBLAS's memory not attributed to libcublas"
assert owner(os.path.basename(probe)) >= (32 << 20) + 2 * (4 << 20)
(stale,) = [f for f in doc["findings"] if f["kind"] == "stale_param"]
alloc = stale["allocation"]
assert alloc["bytes"] == 32 << 20 and stale["retained_bytes"] == 32 << 20
assert any(fr.get("function") == "allocate_model_table" for fr in alloc["stack"]), alloc["stack"]
assert not any("nccl" in (fr.get("module") or "") or "cublas" in (fr.get("module") or "") for fr in alloc["stack"])
print("PASS memory by library:", ", ".join(sorted(libs)))
