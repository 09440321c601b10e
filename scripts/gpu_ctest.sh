#!/usr/bin/env bash
# GPU part of scripts/gpu_all.sh: the native suites on the GPU build (the
# gpu label included: nothing skips for want of a GPU), then PyTorch on the
# GPU under the shim: the demo script with the default caching allocator and
# with expandable segments (report with containing allocations), and
# torch.profiler under the shim (does its trace keep its CUDA kernels?).
set -uo pipefail
build="${TPAUDIT_GPU_BUILD:?}"
tpaudit="$build/bin/tpaudit"
(cd "$build" && ctest -j 8 --output-on-failure -L 'shim|gpu|runtime' 2>&1 | tail -n 25)
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
for conf in default expandable; do
  out="$OUT/demo-$conf"; rm -rf "$out"
  if [ $conf = expandable ]; then export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True; fi
  "$tpaudit" run -o "$out/buggy" -- python3 examples/finetune.py --order buggy --device cuda > /dev/null
  "$tpaudit" report "$out/buggy" > "$OUT/report-$conf.txt"; head -n 30 "$OUT/report-$conf.txt"
  "$tpaudit" report --format json -o "$OUT/report-$conf.json" "$out/buggy"
  "$tpaudit" gate "$out/buggy" | tail -n 1; echo "gate buggy ($conf) exit ${PIPESTATUS[0]}"
  "$tpaudit" gate --format json "$out/buggy"; echo "gate json buggy ($conf) exit $?"
  "$tpaudit" run -o "$out/fixed" -- python3 examples/finetune.py --order fixed --device cuda > /dev/null
  "$tpaudit" gate "$out/fixed" | tail -n 1; echo "gate fixed ($conf) exit ${PIPESTATUS[0]}"
  python3 - "$out/buggy" <<'PY'
import glob, sqlite3, sys
for db in glob.glob(sys.argv[1] + "/*.db"):
    c = sqlite3.connect(db)
    print("run:", c.execute("select cupti, python, complete, cupti_dropped from run").fetchone())
    print("alloc rows:", c.execute("select op, memkind, count(*), sum(bytes) from alloc group by 1, 2").fetchall())
    print("api calls:", c.execute("select api, count(*) from api_call group by 1").fetchall())
PY
  unset PYTORCH_CUDA_ALLOC_CONF
done
echo "== torch: NCCL and cuBLAS memory by library"
python3 tests/gpu/torch_libraries.py "$tpaudit" 2>&1 | tail -n 40
cat > /tmp/prof.py <<'PY'
import torch
from torch.profiler import profile, ProfilerActivity
x = torch.randn(1024, 1024, device="cuda")
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as p:
    for _ in range(5):
        y = x @ x
    torch.cuda.synchronize()
kernels = [e for e in p.events() if e.device_type == torch.autograd.DeviceType.CUDA]
print("profiler CUDA kernel events:", len(kernels))
PY
for mode in none auto off; do
  if [ $mode = none ]; then python3 /tmp/prof.py 2>&1 | tail -n 2; echo "  (no shim)"; continue; fi
  TPAUDIT_CUPTI=$mode "$tpaudit" run -o "$OUT/prof-$mode" -- python3 /tmp/prof.py 2>&1 | tail -n 3; echo "  (TPAUDIT_CUPTI=$mode)"
  python3 -c "import glob,sqlite3;[print(sqlite3.connect(d).execute('select cupti from run').fetchone()) for d in glob.glob('$OUT/prof-$mode/*.db')]"
done
