#!/usr/bin/env bash
# Builds cupti_footprint.c against the machine's CUDA toolkit and prints each
# CUPTI set-up's device memory (docs/CUPTI.md). Run on the GPU machine:
#   bash tests/gpu/cupti_footprint/run.sh
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cuda="${CUDA_HOME:-/usr/local/cuda}"
inc="$(dirname "$(find -L "$cuda" -name cupti.h | head -1)")"
lib="$(dirname "$(find -L "$cuda" -name 'libcupti.so*' | head -1)")"
rt="$(dirname "$(find -L "$cuda" -name 'libcudart.so*' | head -1)")"
bin="$(mktemp -d)/cupti_footprint"
gcc -std=c11 -O1 -Wall -Wextra -Werror -o "$bin" "$here/cupti_footprint.c" -I"$inc" -I"$cuda/include" \
  -L"$lib" -L"$rt" -lcupti -lcudart -Wl,-rpath,"$lib:$rt"
for steps in none sub sub-cb nopre-reg-mem-pool sub-cb-nopre-reg-mem-pool sub-cb-reg-mem \
  none-oom sub-cb-nopre-reg-mem-pool-oom none-many sub-cb-nopre-reg-mem-pool-many; do
  "$bin" "$steps"
done
