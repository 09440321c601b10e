#!/usr/bin/env bash
# Builds llm.c's train_gpt2cu, the anchor of kernels/bench/bench_tprt.sh, twice,
# from a copy of karpathy/llm.c that scripts/device_prep.sh exported into
# .carry/llmc (llm.c's code is never part of this repository):
#   WORK        bf16, no cuDNN (llm.c's own attention kernels), no NCCL/MPI
#   WORK-cudnn  the same with USE_CUDNN=1: cuDNN's flash attention, llm.c's
#               fast path, when the cudnn-frontend headers were carried
#               (.carry/cudnn-frontend/include) and a cuDNN 9 library is found
# The two builds run side by side (the cuDNN one compiles cudnn_att.cpp, about
# a minute).  CUDA 13 changed the last argument of cudaMemAdvise from a device
# id to a struct cudaMemLocation, so each copy's one call that passes
# cudaCpuDeviceId is rewritten to a host location when the toolkit's header
# has the new signature.
# cuDNN: env LLMC_CUDNN_DIR names a folder with include/cudnn.h and
#   lib/libcudnn.so.9; else the `nvidia/cudnn` pip package of $PYTHON
#   (python3), as installed beside torch; else a system libcudnn.so.9 with
#   cudnn.h in the toolkit's or /usr/include.  The package ships only
#   libcudnn.so.9, so WORK-cudnn/lib gets a libcudnn.so link to it (and a
#   libcuda.so link when the linker would find none); the binary carries an
#   rpath to the cuDNN library folder, so it runs without LD_LIBRARY_PATH.
#   WORK-cudnn/CUDNN says which cuDNN and cudnn-frontend it was built with.
# A WORK whose binary was built from the same sources, flags, toolkit and
# cuDNN (WORK/STAMP) is kept, so a second device call on a warm machine does
# not compile again; LLMC_REBUILD=1 rebuilds.
# usage: kernels/bench/build_llmc.sh [SRC (.carry/llmc)] [WORK (/tmp/llmc-build)]
#   env LLMC_GPU_CC=90 forces the GPU arch (else the Makefile asks nvidia-smi);
#   LLMC_CUDNN_FRONTEND (.carry/cudnn-frontend), LLMC_CUDNN_DIR, LLMC_NO_CUDNN=1.
# stdout: "llm.c: not carried, skipped" (exit 3); else each build's time, a
#   failed build's log tail, "llm.c-cudnn: skipped (REASON)" when the cuDNN
#   build cannot be tried, and last "llmc_bin PATH" and "llmc_cudnn_bin PATH"
#   for the builds that succeeded.  Exit 0 when every build tried succeeded
#   (a skipped cuDNN build included), 1 when one failed.
set -uo pipefail
here="$(cd "$(dirname "$0")/../.." && pwd)"
src="${1:-$here/.carry/llmc}"
work="${2:-/tmp/llmc-build}"
work_cudnn="$work-cudnn"
frontend="${LLMC_CUDNN_FRONTEND:-$here/.carry/cudnn-frontend}"
python="${PYTHON:-python3}"
if [ ! -f "$src/train_gpt2.cu" ] || [ ! -f "$src/Makefile" ]; then
  echo "llm.c: not carried, skipped"
  exit 3
fi
command -v nvcc >/dev/null 2>&1 || export PATH="/usr/local/cuda/bin:$PATH"
command -v nvcc >/dev/null 2>&1 || { echo "llm.c: no nvcc, skipped"; exit 3; }
cuda_inc="$(cd "$(dirname "$(command -v nvcc)")/../include" && pwd)"
cuda_lib="$(cd "$cuda_inc/../lib64" 2>/dev/null && pwd)"

# Link DIR/NAME.so to the library the loader knows as NAME.so.1 (or the
# toolkit's link stub), unless the linker already finds NAME.so.
link_driver_lib() { # DIR NAME
  ldconfig -p 2>/dev/null | grep -q "$2\.so " && return 0
  local lib
  lib=$(ldconfig -p 2>/dev/null | awk -v n="$2.so.1" '$1 == n {print $NF; exit}')
  [ -z "$lib" ] && [ -f "$cuda_lib/stubs/$2.so" ] && lib="$cuda_lib/stubs/$2.so"
  [ -n "$lib" ] && mkdir -p "$1" && ln -sf "$lib" "$1/$2.so"
}

# A fresh copy of the sources in DIR, patched for CUDA 13, with DIR/lib for link fixes.
prepare_copy() { # DIR
  rm -rf "$1" && mkdir -p "$1/lib" && cp -r "$src/." "$1/"
  if grep -q 'cudaMemAdvise(.*struct cudaMemLocation location)' "$cuda_inc/cuda_runtime_api.h" 2>/dev/null; then
    sed -i 's/cudaMemAdviseSetPreferredLocation, cudaCpuDeviceId)/cudaMemAdviseSetPreferredLocation, cudaMemLocation{cudaMemLocationTypeHost, 0})/' \
      "$1/llmc/cuda_utils.cuh"
    grep -q 'cudaMemLocationTypeHost' "$1/llmc/cuda_utils.cuh" || echo "warning: the cudaMemAdvise call to rewrite was not found"
  fi
  # The Makefile links -lnvidia-ml; a driver install often has only the .so.1.
  link_driver_lib "$1/lib" libnvidia-ml
}

# The folder of a cuDNN 9 install (include/cudnn.h, lib/libcudnn.so.9) on stdout, or nothing.
find_cudnn() {
  local d
  # shellcheck disable=SC2046  # one word per search folder
  for d in "${LLMC_CUDNN_DIR:-}" \
           "$("$python" -c 'import nvidia.cudnn as m; print(list(m.__path__)[0])' 2>/dev/null)" \
           $("$python" -c 'import site, sys; print(*site.getsitepackages(), *sys.path)' 2>/dev/null | tr ' ' '\n' |
             sed -n 's#$#/nvidia/cudnn#p'); do
    [ -n "$d" ] && [ -f "$d/include/cudnn.h" ] && [ -e "$d/lib/libcudnn.so.9" ] && { echo "$d"; return 0; }
  done
  local lib inc
  lib=$(ldconfig -p 2>/dev/null | awk '$1 == "libcudnn.so.9" {print $NF; exit}')
  for inc in "$cuda_inc" /usr/include /usr/include/x86_64-linux-gnu; do
    if [ -n "$lib" ] && [ -f "$inc/cudnn.h" ]; then
      mkdir -p "$work_cudnn.sys/lib" && ln -sfn "$inc" "$work_cudnn.sys/include" && ln -sf "$lib" "$work_cudnn.sys/lib/"
      echo "$work_cudnn.sys"; return 0
    fi
  done
}

cudnn_version() { # DIR: "9.19.0" from its cudnn_version.h
  awk '/#define CUDNN_(MAJOR|MINOR|PATCHLEVEL) / {v = v (v == "" ? "" : ".") $3} END {print v}' \
    "$1/include/cudnn_version.h" 2>/dev/null
}

# Sets skip (why the cuDNN build cannot be tried, or empty) and cudnn_dir.
check_cudnn() {
  skip="" cudnn_dir=""
  if [ -n "${LLMC_NO_CUDNN:-}" ]; then
    skip="LLMC_NO_CUDNN is set"
  elif [ ! -f "$frontend/include/cudnn_frontend.h" ]; then
    skip="no cudnn-frontend headers at $frontend/include (scripts/device_prep.sh with CUDNN_FRONTEND_GIT_DIR)"
  else
    cudnn_dir=$(find_cudnn)
    [ -n "$cudnn_dir" ] ||
      skip="no cuDNN 9 found (LLMC_CUDNN_DIR, the nvidia/cudnn package of $python, or a system libcudnn.so.9 with cudnn.h)"
  fi
}

build() { # NAME DIR STAMP MAKE-ARGS...: runs make in DIR, log in DIR/build.log, prints the outcome
  local name="$1" dir="$2" stamp="$3" t0=$SECONDS
  shift 3
  if (cd "$dir" && make "$@") > "$dir/build.log" 2>&1 && [ -x "$dir/train_gpt2cu" ]; then
    echo "$stamp" > "$dir/STAMP"
    echo "$name: built train_gpt2cu in $(( SECONDS - t0 ))s (make $*)"
  else
    echo "$name: build failed after $(( SECONDS - t0 ))s (make $*):"
    tail -n 25 "$dir/build.log"
    return 1
  fi
}

# DIR holds a binary built from STAMP (sources, flags, toolkit, cuDNN) and LLMC_REBUILD is unset.
fresh() { # DIR STAMP
  [ -z "${LLMC_REBUILD:-}" ] && [ -x "$1/train_gpt2cu" ] && [ "$(cat "$1/STAMP" 2>/dev/null)" = "$2" ]
}

arch=()
[ -n "${LLMC_GPU_CC:-}" ] && arch=("GPU_COMPUTE_CAPABILITY=$LLMC_GPU_CC")
stamp="llm.c $(cat "$src/COMMIT" 2>/dev/null) ${arch[*]} $(nvcc --version | tail -n 1)"
plain_pid=""
plain_out=$(mktemp /tmp/llmc-build.XXXXXX)
trap 'rm -f "$plain_out"' EXIT
if fresh "$work" "$stamp"; then
  echo "llm.c: $work/train_gpt2cu is from the same sources and flags, kept (LLMC_REBUILD=1 rebuilds)" > "$plain_out"
else
  prepare_copy "$work"
  (LIBRARY_PATH="$work/lib${LIBRARY_PATH:+:$LIBRARY_PATH}" \
     build llm.c "$work" "$stamp" train_gpt2cu NO_MULTI_GPU=1 NO_USE_MPI=1 USE_CUDNN=0 "${arch[@]}") > "$plain_out" 2>&1 &
  plain_pid=$!
fi

check_cudnn
cudnn_rc=0
[ -z "$skip" ] &&
  stamp_cudnn="$stamp; cuDNN $(cudnn_version "$cudnn_dir") $cudnn_dir; frontend $(cat "$frontend/COMMIT" 2>/dev/null)"
if [ -n "$skip" ]; then
  cudnn_out="llm.c-cudnn: skipped ($skip)"
elif fresh "$work_cudnn" "$stamp_cudnn"; then
  cudnn_out="llm.c-cudnn: $work_cudnn/train_gpt2cu is from the same sources and flags, kept (LLMC_REBUILD=1 rebuilds)"
else
  prepare_copy "$work_cudnn"
  mkdir -p "$work_cudnn/cudnn-frontend" && cp -r "$frontend/include" "$work_cudnn/cudnn-frontend/"
  ln -sf "$cudnn_dir/lib/libcudnn.so.9" "$work_cudnn/lib/libcudnn.so"
  link_driver_lib "$work_cudnn/lib" libcuda
  echo "cuDNN $(cudnn_version "$cudnn_dir") ($cudnn_dir), cudnn-frontend $(cat "$frontend/COMMIT" 2>/dev/null || echo '?')" \
    > "$work_cudnn/CUDNN"
  # The frontend needs NVRTC and the driver API at link time.  HOME points at
  # the copy so that the Makefile takes its ./cudnn-frontend, not one in $HOME.
  cudnn_out=$(HOME="$work_cudnn" CPATH="$cudnn_dir/include${CPATH:+:$CPATH}" \
    LIBRARY_PATH="$work_cudnn/lib${LIBRARY_PATH:+:$LIBRARY_PATH}" \
    build llm.c-cudnn "$work_cudnn" "$stamp_cudnn" -j train_gpt2cu NO_MULTI_GPU=1 NO_USE_MPI=1 USE_CUDNN=1 "${arch[@]}" \
      "NVCC_LDLIBS=-L$cuda_lib -lnvrtc -lcuda -Xlinker -rpath=$cudnn_dir/lib:$cuda_lib" 2>&1)
  cudnn_rc=$?
fi
plain_rc=0
[ -n "$plain_pid" ] && { wait "$plain_pid"; plain_rc=$?; }
cat "$plain_out"
echo "$cudnn_out"
[ -z "$skip" ] && [ "$cudnn_rc" = 0 ] && echo "llm.c-cudnn: $(cat "$work_cudnn/CUDNN")"
[ "$plain_rc" = 0 ] && echo "llmc_bin $work/train_gpt2cu"
[ -z "$skip" ] && [ "$cudnn_rc" = 0 ] && echo "llmc_cudnn_bin $work_cudnn/train_gpt2cu"
[ "$plain_rc" = 0 ] && [ "$cudnn_rc" = 0 ] || exit 1
