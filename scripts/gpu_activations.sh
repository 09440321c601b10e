#!/usr/bin/env bash
# GPU part of scripts/gpu_all.sh (TPAUDIT_GPU_PARTS=gpu_activations), issue
# 48: activations saved for backward by the module that made them, side by
# side with PyTorch's MemTracker on the device.  Runs
# tests/python/test_activations.py with TPAUDIT_ACTIVATIONS_DEVICE=cuda: HF
# GPT-2 124M (12 layers, batch 8 x 1024) and HF Llama from a small config,
# one training step under MemTracker, then the same step under `tpaudit run`
# audited inside backward; each block, its attention and its MLP within 5%
# of MemTracker's (the report and gate checks are the CPU's, skipped here).
# Prints pytest's summary; its JUnit XML and the runs' databases go to
# $OUT/activations.  Exit: pytest's (0: all passed).
set -uo pipefail
build="${TPAUDIT_GPU_BUILD:?}"
res="$OUT/activations"
mkdir -p "$res"
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false TPAUDIT_ACTIVATIONS_DEVICE=cuda
export TPAUDIT_TEST_LIB="$build/lib/libtpaudit.so"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
cd tests/python || exit 1
python3 -m pytest -v -rs -p no:cacheprovider --basetemp="$res/tmp" --junitxml="$res/junit.xml" test_activations.py
