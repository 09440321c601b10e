#!/usr/bin/env bash
# GPU part of scripts/gpu_all.sh for tprt's CUDA backend: the kernel tests
# (every CUDA kernel against its CPU reference), the TP=1 loss curve on the
# GPU against the CPU's and the tpaudit findings of --device cuda
# (tests/gpu/check_tprt_cuda.py), then the GPT-2 124M throughput against
# PyTorch (bench/tprt/bench_tprt.sh).  Skip the bench: TPRT_NO_BENCH=1.
set -uo pipefail
build="${TPAUDIT_GPU_BUILD:?}"
out="${OUT:-/tmp}"
rc=0
nvidia-smi --query-gpu=name,memory.total,clocks.sm --format=csv,noheader
echo "== kernel tests"
"$build/bin/test_tprt_cuda" || rc=1
echo "== loss curve and audit"
python3 tests/gpu/check_tprt_cuda.py "$build/bin/tprt" "$build/bin/tpaudit" "$out" || rc=1
if [ -z "${TPRT_NO_BENCH:-}" ]; then
  echo "== bench"
  bash bench/tprt/bench_tprt.sh "$build/bin/tprt" 25 || rc=1
fi
exit $rc
