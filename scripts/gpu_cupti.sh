#!/usr/bin/env bash
# GPU part of scripts/gpu_all.sh: tpaudit beside other CUPTI users. Counts
# torch.profiler's CUDA kernel events without tpaudit and under `tpaudit run`
# with default settings, CUDA first and profiler first
# (tests/gpu/profiler_kernels.py; exit 1 when they differ); checks that
# tpaudit alone still traces; and, where installed, runs the CUDA probe under
# compute-sanitizer and Nsight Systems (what they put in the target's
# environment, and the cupti field tpaudit records there). Results in $OUT/cupti.
set -uo pipefail
build="${TPAUDIT_GPU_BUILD:?}"
tpaudit="$build/bin/tpaudit"
res="$OUT/cupti"
mkdir -p "$res"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
cupti_of() {
  python3 - "$1" <<'PY'
import glob, sqlite3, sys
for db in sorted(glob.glob(sys.argv[1] + "/*.db")):
    c = sqlite3.connect(db)
    print("  run.cupti =", repr(c.execute("select cupti from run").fetchone()[0]),
          "| cupti alloc rows:", c.execute("select count(*) from alloc where source='cupti'").fetchone()[0])
PY
}

echo "== torch.profiler kernel events, without and under tpaudit (TPAUDIT_CUPTI=auto)"
python3 tests/gpu/profiler_kernels.py "$tpaudit" "$res" 2>&1 | tee "$res/profiler_kernels.txt"
rc=${PIPESTATUS[0]}

echo "== tpaudit alone keeps CUPTI"
"$tpaudit" run --force -o "$res/alone" -- python3 -c \
  "import torch; x = torch.randn(1024, 1024, device='cuda'); print(float((x @ x).sum()))" 2>&1 | tail -n 3
cupti_of "$res/alone"
(cd "$build" && ctest -R 'unit_cupti|gpu_alloc_probe' 2>&1 | tail -n 6)

sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer /usr/local/cuda/compute-sanitizer/compute-sanitizer 2>/dev/null | head -n 1)
if [ -n "$sanitizer" ] && [ -x "$build/bin/alloc_probe" ]; then
  echo "== compute-sanitizer: the target's environment, then alloc_probe under it and tpaudit"
  "$sanitizer" --target-processes all env 2>/dev/null | grep -E 'INJECTION|LD_PRELOAD|SANITIZER' | sed 's/^/  env: /'
  "$sanitizer" --target-processes all "$tpaudit" run --force -o "$res/sanitizer" -- "$build/bin/alloc_probe" 2>&1 | tail -n 4
  cupti_of "$res/sanitizer"
else
  echo "== compute-sanitizer: not installed here"
fi
if command -v nsys >/dev/null && [ -x "$build/bin/alloc_probe" ]; then
  echo "== Nsight Systems: the target's environment, then alloc_probe under it and tpaudit"
  nsys profile --force-overwrite true -o "$res/nsys-env" env 2>/dev/null | grep -E 'INJECTION|LD_PRELOAD|NSYS' | sed 's/^/  env: /'
  nsys profile --force-overwrite true -t cuda -o "$res/nsys" "$tpaudit" run --force -o "$res/nsys-run" -- "$build/bin/alloc_probe" 2>&1 | tail -n 4
  cupti_of "$res/nsys-run"
else
  echo "== Nsight Systems: not installed here"
fi
exit "$rc"
