#!/usr/bin/env bash
# GPU part of scripts/gpu_all.sh: the whole ctest suite on the GPU build
# (labels gpu included, nothing skips for want of a GPU), then the demo
# training script on the GPU under the shim, with its text report.
set -uo pipefail
build="${TPAUDIT_GPU_BUILD:?}"
(cd "$build" && ctest -j 8 --output-on-failure -E 'python' 2>&1 | tail -n 40)
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
out="$OUT/demo"; rm -rf "$out"
"$build/bin/tpaudit" run -o "$out/buggy" -- python3 examples/finetune.py --order buggy --device cuda &&
  "$build/bin/tpaudit" report "$out/buggy" | tee "$OUT/demo-buggy.txt"
"$build/bin/tpaudit" gate "$out/buggy"; echo "gate buggy exit $?"
"$build/bin/tpaudit" run -o "$out/fixed" -- python3 examples/finetune.py --order fixed --device cuda &&
  "$build/bin/tpaudit" gate "$out/fixed"; echo "gate fixed exit $?"
for db in "$out"/buggy/*.db; do sqlite3 "$db" "select cupti, python, complete from run; select count(*) from alloc; select count(*) from tensor;" 2>/dev/null || true; done
