#!/usr/bin/env bash
# An Nsight Compute look at about one tprt training step (GPT-2 124M, batch
# 8 x 1024, TP=1): after the first steps' launches (step 1 also times the
# cuBLASLt candidates), NCU_COUNT kernels are profiled for their duration and
# their compute (SM) and memory (DRAM) throughput against the peak, with the
# clocks left alone; kernels/bench/ncu_summary.py sums them per kernel family.
# Writes $OUT/ncu_tprt.csv and prints the table.  Needs ncu on the PATH or
# under /opt/nvidia/nsight-compute.
# usage: kernels/scripts/gpu_tprt_ncu.sh TPRT   (env NCU_SKIP, NCU_COUNT)
set -uo pipefail
tprt="${1:?usage: gpu_tprt_ncu.sh TPRT}"
here="$(cd "$(dirname "$0")/.." && pwd)" # kernels/
out="${OUT:-/tmp}"
ncu="$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -n 1)"
[ -x "$ncu" ] || { echo "ncu: not found, skipped"; exit 0; }
metrics=gpu__time_duration.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,dram__throughput.avg.pct_of_peak_sustained_elapsed
TPAUDIT_AUDIT=none timeout 400 "$ncu" --clock-control none --csv --metrics "$metrics" \
  --launch-skip "${NCU_SKIP:-1600}" --launch-count "${NCU_COUNT:-330}" \
  "$tprt" train --model gpt2-124m --device cuda --batch 8 --seq 1024 --steps 8 --lr 3e-4 > "$out/ncu_tprt.csv" 2> "$out/ncu_tprt.err"
echo "ncu exit $? ($(grep -c gpu__time_duration "$out/ncu_tprt.csv") kernels)"
python3 "$here/bench/ncu_summary.py" "$out/ncu_tprt.csv"
