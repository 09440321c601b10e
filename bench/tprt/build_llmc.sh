#!/usr/bin/env bash
# Builds llm.c's train_gpt2cu (the anchor of bench/tprt/bench_tprt.sh) from a
# copy of karpathy/llm.c that scripts/device_prep.sh exported into .carry/llmc.
# The tree is copied into WORK and built there (bf16, no cuDNN, no NCCL/MPI);
# llm.c's code is never part of this repository.  CUDA 13 changed the last
# argument of cudaMemAdvise from a device id to a struct cudaMemLocation, so
# the copy's one call that passes cudaCpuDeviceId is rewritten to a host
# location when the toolkit's header has the new signature.
# usage: bench/tprt/build_llmc.sh [SRC (.carry/llmc)] [WORK (/tmp/llmc-build)]
#   env LLMC_GPU_CC=90 forces the GPU arch (else the Makefile asks nvidia-smi).
# stdout: "llm.c: not carried, skipped" (exit 3), or the build time and, last,
#   "llmc_bin PATH" (exit 0); a failed build prints its log's tail (exit 1).
set -uo pipefail
here="$(cd "$(dirname "$0")/../.." && pwd)"
src="${1:-$here/.carry/llmc}"
work="${2:-/tmp/llmc-build}"
if [ ! -f "$src/train_gpt2.cu" ] || [ ! -f "$src/Makefile" ]; then
  echo "llm.c: not carried, skipped"
  exit 3
fi
command -v nvcc >/dev/null 2>&1 || export PATH="/usr/local/cuda/bin:$PATH"
command -v nvcc >/dev/null 2>&1 || { echo "llm.c: no nvcc, skipped"; exit 3; }
rm -rf "$work"
mkdir -p "$work"
cp -r "$src/." "$work/"

cuda_inc="$(dirname "$(command -v nvcc)")/../include"
if grep -q 'cudaMemAdvise(.*struct cudaMemLocation location)' "$cuda_inc/cuda_runtime_api.h" 2>/dev/null; then
  target="$work/llmc/cuda_utils.cuh"
  sed -i 's/cudaMemAdviseSetPreferredLocation, cudaCpuDeviceId)/cudaMemAdviseSetPreferredLocation, cudaMemLocation{cudaMemLocationTypeHost, 0})/' "$target"
  if grep -q 'cudaMemLocationTypeHost' "$target"; then
    echo "llm.c: cudaMemAdvise rewritten for CUDA 13 (cudaMemLocation) in the build copy"
  else
    echo "llm.c: warning: the cudaMemAdvise call to rewrite was not found in llmc/cuda_utils.cuh"
  fi
fi

# The Makefile links -lnvidia-ml; a driver install often has only the .so.1
# (else the toolkit's link stub, when it has one).
if ! ldconfig -p 2>/dev/null | grep -q 'libnvidia-ml\.so '; then
  nvml=$(ldconfig -p 2>/dev/null | awk '/libnvidia-ml\.so\.1 /{print $NF; exit}')
  stub="$cuda_inc/../lib64/stubs/libnvidia-ml.so"
  [ -z "$nvml" ] && [ -f "$stub" ] && nvml="$stub"
  if [ -n "$nvml" ]; then
    mkdir -p "$work/lib" && ln -sf "$nvml" "$work/lib/libnvidia-ml.so"
    export LIBRARY_PATH="$work/lib${LIBRARY_PATH:+:$LIBRARY_PATH}"
  fi
fi

make_args=(train_gpt2cu NO_MULTI_GPU=1 NO_USE_MPI=1 USE_CUDNN=0)
[ -n "${LLMC_GPU_CC:-}" ] && make_args+=("GPU_COMPUTE_CAPABILITY=$LLMC_GPU_CC")
t0=$(date +%s)
if ! (cd "$work" && make "${make_args[@]}") > "$work/build.log" 2>&1; then
  echo "llm.c: build failed after $(( $(date +%s) - t0 ))s (make ${make_args[*]}):"
  tail -n 25 "$work/build.log"
  exit 1
fi
echo "llm.c: built train_gpt2cu in $(( $(date +%s) - t0 ))s (make ${make_args[*]})"
echo "llmc_bin $work/train_gpt2cu"
