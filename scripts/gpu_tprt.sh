#!/usr/bin/env bash
# GPU part of scripts/gpu_all.sh for tprt's CUDA backend: the kernel tests
# (every CUDA kernel against its CPU reference), the TP=1 loss curve on the
# GPU against the CPU's and the tpaudit findings of --device cuda
# (tests/gpu/check_tprt_cuda.py), TP=2 over NCCL (tests/gpu/check_tprt_tp.py:
# with >= 2 GPUs the GPU TP=2 loss curve against the CPU TP=2 one, the buggy
# policy's stale table on both ranks, a killed rank; with 1 GPU "skip: needs
# 2 GPUs", the refusal, and the same checks as notes with both ranks on the
# one GPU, TPRT_ALLOW_SHARED_GPU=1), then the GPT-2 124M throughput against
# PyTorch eager and torch.compile, llm.c when carried, and tprt under tpaudit
# (bench/tprt/bench_tprt.sh).  Skip the bench: TPRT_NO_BENCH=1.
set -uo pipefail
build="${TPAUDIT_GPU_BUILD:?}"
out="${OUT:-/tmp}"
rc=0
nvidia-smi --query-gpu=name,memory.total,clocks.sm --format=csv,noheader
echo "== kernel tests"
"$build/bin/test_tprt_cuda" || rc=1
echo "== loss curve and audit"
python3 tests/gpu/check_tprt_cuda.py "$build/bin/tprt" "$build/bin/tpaudit" "$out" || rc=1
echo "== TP=2 over NCCL ($(nvidia-smi -L | grep -c '^GPU ') GPU(s))"
python3 tests/gpu/check_tprt_tp.py "$build/bin/tprt" "$build/bin/tpaudit" "$out" || rc=1
if [ -z "${TPRT_NO_BENCH:-}" ]; then
  echo "== bench"
  bash bench/tprt/build_llmc.sh .carry/llmc /tmp/llmc-build > /tmp/llmc-build.txt
  llmc_rc=$?
  cat /tmp/llmc-build.txt
  [ "$llmc_rc" = 1 ] && rc=1
  LLMC_BIN="$(sed -n 's/^llmc_bin //p' /tmp/llmc-build.txt)" TPAUDIT_BIN="$build/bin/tpaudit" OUT="$out" \
    bash bench/tprt/bench_tprt.sh "$build/bin/tprt" 30 || rc=1
fi
exit $rc
