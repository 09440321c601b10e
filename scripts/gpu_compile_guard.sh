#!/usr/bin/env bash
# GPU part of scripts/gpu_all.sh (TPAUDIT_GPU_PARTS=gpu_compile_guard): HF
# GPT-2 124M under torch.compile, batch 8 x 1024, bf16 autocast, fused AdamW
# (bench/gpu/gpt2_step.py --compile --fused), 30 steps, without tpaudit and
# under `tpaudit run`, in ROUNDS (default 5) alternated rounds for each mode
# of COMPILE_MODES (default: "default reduce-overhead"; reduce-overhead is
# CUDA graphs).  For each mode it prints
#   - dynamo's counters and the recompile / graph-break records of the first
#     round's logs (TORCH_LOGS=graph_breaks,recompiles): they must be equal;
#   - each round's median step time, plain and under tpaudit, and the ratio
#     of the medians over the rounds (issue 47: within 1.01x);
#   - the loss curves side by side (plain: min..max over the rounds, the runs'
#     own spread; tpaudit: min..max over its rounds): every tpaudit loss must
#     lie within the plain spread widened by its own width (or 0.01 where the
#     plain runs agree to the digit).
# Exit 1 when a run failed, the counters or records differ, a loss is out
# of the spread or the ratio is above 1.01.  Results in $OUT/compile_guard.
# About 40 s a run on an H100 with inductor's cache warm (20 runs: ~14 min;
# COMPILE_MODES=default and COMPILE_MODES=reduce-overhead split it in two).
set -uo pipefail
build="${TPAUDIT_GPU_BUILD:?}"
res="$OUT/compile_guard"
rounds="${ROUNDS:-5}"
modes="${COMPILE_MODES:-default reduce-overhead}"
mkdir -p "$res"
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
rc=0
# one MODE ROUND WHO: a run of the step, its output, log and losses in $res
one() {
  local mode=$1 round=$2 who=$3 base="$res/$1.$3.$2"
  local args=(bench/gpu/gpt2_step.py --compile --fused --losses "$base.losses")
  [ "$mode" != default ] && args+=(--mode "$mode")
  # the logs of the first round only (torch 2.11 fails to start on an empty TORCH_LOGS)
  local logs=(env -u TORCH_LOGS)
  [ "$round" = 1 ] && logs=(env TORCH_LOGS=graph_breaks,recompiles)
  if [ "$who" = plain ]; then
    "${logs[@]}" python3 "${args[@]}" > "$base.out" 2> "$base.log"
  else
    "${logs[@]}" "$build/bin/tpaudit" run --force -o "$res/db.$mode.$round" -- python3 "${args[@]}" \
      > "$base.out" 2> "$base.log"
  fi
  local status=$?
  [ "$status" = 0 ] || { echo "$mode $who round $round: exit $status"; tail -5 "$base.log"; rc=1; }
}
for mode in $modes; do
  echo "== mode $mode, $rounds rounds"
  for round in $(seq 1 "$rounds"); do
    if [ $((round % 2)) = 1 ]; then one "$mode" "$round" plain; one "$mode" "$round" tpaudit
    else one "$mode" "$round" tpaudit; one "$mode" "$round" plain; fi
  done
  for who in plain tpaudit; do
    base="$res/$mode.$who.1"
    recompiles=$(grep -c "Recompiling function" "$base.log")
    breaks=$(grep -ci "graph break" "$base.log")
    echo "$who: $recompiles recompile records, $breaks graph-break records; $(grep '^dynamo' "$base.out")"
    echo "$recompiles $breaks $(grep '^dynamo' "$base.out")" > "$res/$mode.$who.counts"
  done
  if cmp -s "$res/$mode.plain.counts" "$res/$mode.tpaudit.counts"; then
    echo "PASS counters: the same counters and records with and without tpaudit"
  else
    echo "FAIL counters: tpaudit changed what torch.compile did"
    rc=1
  fi
  python3 - "$res" "$mode" "$rounds" <<'EOF' || rc=1
import statistics, sys
res, mode, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
def median_ms(who, r):
    for line in open(f"{res}/{mode}.{who}.{r}.out"):
        if line.startswith("median_step_ms"):
            return float(line.split()[1])
def losses(who, r):
    return [float(line.split()[1]) for line in open(f"{res}/{mode}.{who}.{r}.losses")]
plain = [median_ms("plain", r) for r in range(1, rounds + 1)]
tpa = [median_ms("tpaudit", r) for r in range(1, rounds + 1)]
for r in range(rounds):
    print(f"round {r + 1}: plain {plain[r]:.2f} ms, tpaudit {tpa[r]:.2f} ms")
ratio = statistics.median(tpa) / statistics.median(plain)
ok = ratio <= 1.01
print(f"{'PASS' if ok else 'FAIL'} step ratio tpaudit/plain ({mode}, median of {rounds} rounds): {ratio:.4f}x")
curves_p = [losses("plain", r) for r in range(1, rounds + 1)]
curves_t = [losses("tpaudit", r) for r in range(1, rounds + 1)]
print("step  plain min..max        tpaudit min..max")
out = 0
for i, (p, t) in enumerate(zip(zip(*curves_p), zip(*curves_t))):
    width = max(max(p) - min(p), 0.01)
    inside = min(p) - width <= min(t) and max(t) <= max(p) + width
    out += not inside
    print(f"{i + 1:4d}  {min(p):.4f}..{max(p):.4f}   {min(t):.4f}..{max(t):.4f}{'' if inside else '  OUT'}")
print(f"{'PASS' if not out else 'FAIL'} losses: {out} of {len(curves_p[0])} steps out of the plain runs' spread")
sys.exit(0 if ok and not out else 1)
EOF
done
exit "$rc"
