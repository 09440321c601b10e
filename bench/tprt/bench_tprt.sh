#!/usr/bin/env bash
# GPT-2 124M training throughput, TP=1, batch 8 x 1024, on one GPU: tprt's
# CUDA backend (median tokens/s over steps 6.., then its per-layer-kind
# device time with TPRT_PROFILE=1) against PyTorch eager HF GPT2LMHeadModel
# with bf16 autocast (bench/gpu/gpt2_step.py) in the same run; prints the ratio.
# usage: bench/tprt/bench_tprt.sh TPRT [STEPS]
set -uo pipefail
tprt="${1:?usage: bench_tprt.sh TPRT [STEPS]}"
steps="${2:-25}"
here="$(cd "$(dirname "$0")/../.." && pwd)"
median_tps() { awk '/^step/ && $2 > 5 {print $6}' | sort -n | awk '{a[NR]=$1} END {if (NR) print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2); else print 0}'; }
args=(train --model gpt2-124m --device cuda --batch 8 --seq 1024 --steps "$steps" --lr 3e-4)
t0=$(date +%s)
run1=$(TPAUDIT_AUDIT=none "$tprt" "${args[@]}" 2>/tmp/tprt_bench.err) || { echo "tprt failed:"; tail -5 /tmp/tprt_bench.err; exit 1; }
echo "tprt run took $(( $(date +%s) - t0 ))s (model build on the host included)"
echo "$run1" | awk '/^step/ && ($2 <= 3 || $2 % 5 == 0)'
tps=$(echo "$run1" | median_tps)
prof=$(TPRT_PROFILE=1 TPAUDIT_AUDIT=none "$tprt" train --model gpt2-124m --device cuda --batch 8 --seq 1024 --steps 8 \
       --lr 3e-4 2>&1 >/dev/null | grep '^profile:')
ptms=$(python3 "$here/bench/gpu/gpt2_step.py" --steps 30 | awk '/median/{print $2}')
pt_tps=$(python3 -c "print(round(8*1024/($ptms/1000)))")
echo "$prof"
echo "tprt cuda gpt2-124m 8x1024: median $tps tokens/s ($(python3 -c "print(round(8192/$tps*1000, 2))") ms/step)"
echo "pytorch eager HF GPT2LMHeadModel bf16 autocast: median $ptms ms/step, $pt_tps tokens/s"
echo "ratio tprt/pytorch tokens/s: $(python3 -c "print(round($tps/$pt_tps, 3))")"
