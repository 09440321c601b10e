#!/usr/bin/env bash
# Run here (with network), before a GPU run: fills .carry/ (git-ignored) with
# what the GPU machine lacks and scripts/gpu_all.sh needs there.
#   .carry/debs: Debian 12 build packages (libunwind, SQLite's header, static
#                library and CLI, libdw and its compression libraries),
#                unpacked on the device into a private sysroot, never into /.
#   .carry/whl:  Python wheels of the frameworks the device lacks (cp312):
#                megatron-core, and deepspeed built here without compiled ops.
#   .carry/whl-colossal: ColossalAI and transformers 4.51.3 with what they
#                need (requirements-colossal.lock), kept apart: they would
#                shadow the device's transformers for the other parts.
#   .carry/llmc: with env LLMC_GIT_DIR (a git dir of karpathy/llm.c), the
#                sources of its train_gpt2cu, for kernels/bench/build_llmc.sh.
#   .carry/cudnn-frontend/include: with env CUDNN_FRONTEND_GIT_DIR (a git dir
#                of NVIDIA/cudnn-frontend), its header-only include/ tree
#                (about 3.5 MB) and a COMMIT file, for llm.c's cuDNN build.
# Usage: [LLMC_GIT_DIR=D] [CUDNN_FRONTEND_GIT_DIR=D] scripts/device_prep.sh
#        [PYTHON with torch, for building deepspeed]
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
python="${1:-$(bash "$here/scripts/setup.sh" | tail -n 1)}"
carry="$here/.carry"
mkdir -p "$carry/debs" "$carry/whl"

debs=(libunwind-dev libunwind8 libsqlite3-dev libsqlite3-0 sqlite3 libdw-dev libdw1 libelf-dev libelf1
      liblzma-dev zlib1g-dev libzstd-dev libbz2-dev)
(cd "$carry/debs" && apt-get download "${debs[@]}" >/dev/null)

# Wheels for the device's Python 3.12 (one version of each).
wheels=(megatron-core==0.19.2 hjson==3.1.0 pydantic==2.14.4 pydantic_core==2.50.5 annotated-types==0.8.0
        typing-inspection==0.4.5 typing_extensions==4.16.0 py-cpuinfo==9.0.0 msgpack==1.2.4)
"$python" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 -d "$carry/whl" "${wheels[@]}"
if ! ls "$carry/whl"/deepspeed-*.whl >/dev/null 2>&1; then
  DS_BUILD_OPS=0 "$python" -m pip wheel -q --no-deps --no-build-isolation -w "$carry/whl" deepspeed==0.19.8
fi

# ColossalAI's wheels (scripts/gpu_colossal.sh), the versions of
# requirements-colossal.lock that the device lacks: colossalai built here
# without extensions, and bitsandbytes (only imported, by galore_torch)
# repacked with the device's CUDA 13 libraries alone (43 MB -> about 4 MB).
mkdir -p "$carry/whl-colossal"
pins() { grep -E "^($1)==" "$here/requirements-colossal.lock"; }
# shellcheck disable=SC2046  # one word per pinned requirement
"$python" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d "$carry/whl-colossal" $(pins 'transformers|tokenizers|huggingface-hub|peft|galore-torch|requests|urllib3|charset-normalizer')
if ! ls "$carry/whl-colossal"/colossalai-*.whl >/dev/null 2>&1; then
  BUILD_EXT=0 "$python" -m pip wheel -q --no-deps -w "$carry/whl-colossal" "$(pins colossalai)"
fi
if ! ls "$carry/whl-colossal"/bitsandbytes-*.whl >/dev/null 2>&1; then
  bnb="$(mktemp -d)"
  "$python" -m pip download -q --no-deps --only-binary=:all: -d "$bnb" "$(pins bitsandbytes)"
  "$python" -m wheel unpack -d "$bnb/x" "$bnb"/bitsandbytes-*.whl >/dev/null
  find "$bnb/x" -name 'libbitsandbytes_*.so' ! -name '*_cuda13*' ! -name '*_cpu.so' -delete
  "$python" -m wheel pack -d "$carry/whl-colossal" "$bnb"/x/bitsandbytes-* >/dev/null
  rm -rf "$bnb"
fi

# llm.c, the anchor of kernels/bench/bench_tprt.sh: with LLMC_GIT_DIR naming a git
# dir of karpathy/llm.c, the files train_gpt2cu builds from go to .carry/llmc
# (built on the device by kernels/bench/build_llmc.sh; never part of this repository).
if [ -n "${LLMC_GIT_DIR:-}" ]; then
  rm -rf "$carry/llmc" && mkdir -p "$carry/llmc"
  git --git-dir="$LLMC_GIT_DIR" archive HEAD LICENSE Makefile train_gpt2.cu llmc | tar -x -C "$carry/llmc"
  git --git-dir="$LLMC_GIT_DIR" rev-parse --short=12 HEAD > "$carry/llmc/COMMIT"
  echo "device_prep: llm.c $(cat "$carry/llmc/COMMIT") -> .carry/llmc"
fi
# cudnn-frontend (header-only), which llm.c's USE_CUDNN=1 build compiles
# cudnn_att.cpp against; the cuDNN library itself is the device's (the
# nvidia/cudnn package beside torch).
if [ -n "${CUDNN_FRONTEND_GIT_DIR:-}" ]; then
  rm -rf "$carry/cudnn-frontend" && mkdir -p "$carry/cudnn-frontend"
  git --git-dir="$CUDNN_FRONTEND_GIT_DIR" archive HEAD include | tar -x -C "$carry/cudnn-frontend"
  git --git-dir="$CUDNN_FRONTEND_GIT_DIR" rev-parse --short=12 HEAD > "$carry/cudnn-frontend/COMMIT"
  echo "device_prep: cudnn-frontend $(cat "$carry/cudnn-frontend/COMMIT") include/ -> .carry/cudnn-frontend"
fi
{ du -sh "$carry"/*; du -sh "$carry"; } | sed "s#$carry#.carry#; s/^/device_prep: /"
