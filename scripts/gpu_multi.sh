#!/usr/bin/env bash
# Multi-GPU part of scripts/gpu_all.sh (needs a host with 2 or more GPUs;
# prints "skip: ..." otherwise): torchrun DTensor tensor parallelism under
# the shim, buggy and fixed order, with per-rank retained bytes against
# torch.cuda.memory_allocated and the step time with and without the shim.
# tprt's TP=2 run on GPUs is in kernels/scripts/gpu_tprt.sh.
set -uo pipefail
build="${TPAUDIT_GPU_BUILD:?}"
nvidia-smi -L
python3 tests/gpu/dtensor_gpus.py "$build/bin/tpaudit"
rc=$?
[ $rc -eq 77 ] && exit 0
exit $rc
