#!/usr/bin/env bash
# GPU part of scripts/gpu_all.sh for tprt's CUDA backend: the kernel tests
# (every CUDA kernel against its CPU reference), the TP=1 loss curve on the
# GPU against the CPU's and the tpaudit findings of --device cuda
# (kernels/tests/gpu/check_tprt_cuda.py), TP=2 over NCCL (kernels/tests/gpu/check_tprt_tp.py:
# with >= 2 GPUs the GPU TP=2 loss curve against the CPU TP=2 one, the buggy
# policy's stale table on both ranks, a killed rank; with 1 GPU "skip: needs
# 2 GPUs", the refusal, and the same checks as notes with both ranks on the
# one GPU, TPRT_ALLOW_SHARED_GPU=1), then the benches: the attention and
# product micro-benches ($build/bin/tprt_attention_bench, tprt_gemm_bench,
# kernels/bench/sdpa_bench.py, each when present; logs in $OUT) and the GPT-2
# 124M throughput against PyTorch eager and torch.compile, llm.c without and
# with cuDNN when carried (kernels/bench/build_llmc.sh builds both from
# .carry/llmc and .carry/cudnn-frontend), and tprt under tpaudit
# (kernels/bench/bench_tprt.sh; TPRT_BENCH_BATCHES, e.g. "8 auto", picks the
# batches).  Skip the benches: TPRT_NO_BENCH=1; only the benches:
# TPRT_BENCH_ONLY=1 (two device calls, each under the per-call time limit).
# llm.c is built in build-llmc and build-llmc-cudnn (git-ignored) while the
# checks run, in either mode, and kept when nothing changed, so the bench-only
# call on a warm machine does not compile it again.
set -uo pipefail
build="${TPAUDIT_GPU_BUILD:?}"
out="${OUT:-/tmp}"
mkdir -p "$out"
llmc_work="$PWD/build-llmc"
rc=0
# llm.c's two builds (CPU only, about a minute for the cuDNN one) run while the checks use the GPU.
bash kernels/bench/build_llmc.sh .carry/llmc "$llmc_work" > "$out/llmc_build.txt" 2>&1 &
llmc_pid=$!
nvidia-smi --query-gpu=name,memory.total,clocks.sm --format=csv,noheader
if [ -z "${TPRT_BENCH_ONLY:-}" ]; then
  echo "== kernel tests"
  "$build/bin/test_tprt_cuda" || rc=1
  echo "== loss curve and audit"
  python3 kernels/tests/gpu/check_tprt_cuda.py "$build/bin/tprt" "$build/bin/tpaudit" "$out" || rc=1
  echo "== TP=2 over NCCL ($(nvidia-smi -L | grep -c '^GPU ') GPU(s))"
  python3 kernels/tests/gpu/check_tprt_tp.py "$build/bin/tprt" "$build/bin/tpaudit" "$out" || rc=1
fi
if [ -n "${TPRT_NO_BENCH:-}" ]; then
  echo "== llm.c builds (kernels/bench/build_llmc.sh, for a later bench call)"
  wait "$llmc_pid"
  [ $? = 1 ] && rc=1
  cat "$out/llmc_build.txt"
else
  echo "== bench"
  # Micro-benches, each only when built / present; a missing one is a line, not a failure.
  micro() { # FILE LOG COMMAND...: runs the command when FILE is there, output tee'd into $out/LOG
    local name status log="$2"
    name=$(basename "$1")
    if [ ! -e "$1" ]; then echo "== $name: not present, skipped"; return 0; fi
    shift 2
    echo "== $name"
    timeout 300 "$@" 2>&1 | tee "$out/$log"
    status=${PIPESTATUS[0]}
    [ "$status" = 0 ] || { echo "$name: exit $status"; rc=1; }
  }
  micro "$build/bin/tprt_attention_bench" tprt_attention_bench.txt "$build/bin/tprt_attention_bench"
  micro "$build/bin/tprt_gemm_bench" tprt_gemm_bench.txt "$build/bin/tprt_gemm_bench"
  micro kernels/bench/sdpa_bench.py sdpa_bench.txt python3 kernels/bench/sdpa_bench.py
  echo "== llm.c builds (kernels/bench/build_llmc.sh, started with the checks)"
  wait "$llmc_pid"
  llmc_rc=$?
  cat "$out/llmc_build.txt"
  [ "$llmc_rc" = 1 ] && rc=1
  LLMC_BIN="$(sed -n 's/^llmc_bin //p' "$out/llmc_build.txt")" \
    LLMC_CUDNN_BIN="$(sed -n 's/^llmc_cudnn_bin //p' "$out/llmc_build.txt")" \
    TPAUDIT_BIN="$build/bin/tpaudit" OUT="$out" bash kernels/bench/bench_tprt.sh "$build/bin/tprt" 30 || rc=1
fi
exit $rc
