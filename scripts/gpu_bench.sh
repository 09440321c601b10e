#!/usr/bin/env bash
# GPU benchmarks of scripts/gpu_all.sh, side by side in one run: the
# cudaMalloc/cudaFree loop with and without the shim, and GPT-2 124M step
# time with no tool, under tpaudit, and under PyTorch's memory history.
set -uo pipefail
build="${TPAUDIT_GPU_BUILD:?}"
nvcc -O2 -o /tmp/alloc_loop bench/gpu/alloc_loop.c -lcudart || exit 1
for round in 1 2; do
  base=$(/tmp/alloc_loop 100000 | awk '{print $2}')
  shim=$(TPAUDIT_OUT=/tmp/bench-out LD_PRELOAD="$build/lib/libtpaudit.so" /tmp/alloc_loop 100000 | awk '{print $2}')
  echo "alloc pair: no tool $base ns, tpaudit $shim ns, ratio $(python3 -c "print(round($shim/$base, 3))")"
done
for round in 1 2; do
  none=$(python3 bench/gpu/gpt2_step.py | awk '/median/{print $2}')
  tpa=$("$build/bin/tpaudit" run --force -o /tmp/bench-gpt2 -- python3 bench/gpu/gpt2_step.py 2>/dev/null | awk '/median/{print $2}')
  hist=$(python3 bench/gpu/gpt2_step.py --history | awk '/median/{print $2}')
  echo "gpt2 124M step: no tool $none ms, tpaudit $tpa ms, memory history $hist ms"
done
