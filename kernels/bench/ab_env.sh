#!/usr/bin/env bash
# A/B of two tprt settings on the GPU, alternated in one run so that both see
# the same machine: tprt train (GPT-2 124M, bf16, T=1024) at each batch,
# ROUNDS times A then B, each a STEPS-step run whose tokens/s is the median
# of steps 11..STEPS; prints one line per run and, per batch, the medians of
# the runs and B's ratio over A (> 1: B is faster).
# usage: ab_env.sh TPRT_BIN "BATCHES" ROUNDS "A_ENV" "B_ENV" [STEPS]
#   e.g. ab_env.sh build/bin/tprt "8 64" 2 "TPRT_WGRAD_STREAM=0" "TPRT_WGRAD_STREAM=1"
set -uo pipefail
tprt="$1" batches="$2" rounds="$3" a_env="$4" b_env="$5" steps="${6:-30}"
# shellcheck source=kernels/bench/median.sh
. "$(dirname "$0")/median.sh"
one_run() { # ENV BATCH: prints the run's median tokens/s (0 when it failed)
  local log
  log=$(mktemp)
  # shellcheck disable=SC2086
  if env $1 TPAUDIT_AUDIT=none timeout 300 "$tprt" train --model gpt2-124m --device cuda --batch "$2" --seq 1024 \
       --steps "$steps" --lr 3e-4 > "$log" 2>&1; then
    awk '/^step / && $2 > 10 {print $6}' "$log" | median
  else
    echo 0; tail -n 3 "$log" >&2
  fi
  rm -f "$log"
}
for b in $batches; do
  ra=() rb=()
  for ((r = 1; r <= rounds; r++)); do
    x=$(one_run "$a_env" "$b"); ra+=("$x"); echo "batch $b round $r A ($a_env): $x tokens/s"
    y=$(one_run "$b_env" "$b"); rb+=("$y"); echo "batch $b round $r B ($b_env): $y tokens/s"
  done
  ma=$(printf '%s\n' "${ra[@]}" | median) mb=$(printf '%s\n' "${rb[@]}" | median)
  awk -v b="$b" -v a="$ma" -v c="$mb" 'BEGIN {printf("batch %s: A %.0f  B %.0f tokens/s  B/A %.3f\n", b, a, c, a > 0 ? c / a : 0)}'
done
