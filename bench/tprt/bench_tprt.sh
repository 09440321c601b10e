#!/usr/bin/env bash
# GPT-2 124M training throughput on one GPU, side by side in one run, at each
# batch size of TPRT_BENCH_BATCHES (x 1024 tokens):
#   tprt          tprt's CUDA backend, TP=1, no audit (TPAUDIT_AUDIT=none)
#   tprt-under-tpaudit  the same under `$TPAUDIT_BIN run` (CUPTI on, default audit
#                 plan), when env TPAUDIT_BIN names the tpaudit CLI: its ratio is the shim's cost
#   (profile)     tprt's device time per layer kind (TPRT_PROFILE=1), a short
#                 separate run, printed above the table, not a row
#   torch-eager   HF GPT2LMHeadModel, SDPA, bf16 autocast, fused AdamW
#   torch-compile the same model under torch.compile (compile time in the note)
#                 (both: bench/tprt/torch_gpt2.py, one process per row)
#   llm.c         karpathy/llm.c train_gpt2cu, random init (-e d12), no
#                 recompute (-r 0), on a synthetic token shard, when LLMC_BIN
#                 names a built binary (bench/tprt/build_llmc.sh)
# Every row: the median over steps 10..STEPS (1-9 are warm-up) of per-step
# times; a batch that does not fit is an "oom" row, not a failed bench.
# Prints one table (bench/tprt/bench_table.py: tprt's ratio, MFU and its FLOP
# count) and a `bench_tprt_row {json}` line per row; with OUT set, the whole
# output also goes to $OUT/bench_tprt.txt.
# usage: bench/tprt/bench_tprt.sh TPRT [STEPS (30)]
# env: TPRT_BENCH_BATCHES="8 32" (a word "auto": the largest power of two up to
#      256 that llm.c trains without recompute), LLMC_BIN, LLMC_EXTRA (more
#      llm.c flags), TPRT_BENCH_SKIP="compile llmc ..." (systems to leave out),
#      PYTHON (python3), TPRT_BENCH_TORCH_ARGS (more torch_gpt2.py flags; a check
#      off the GPU: "--device cpu --tiny").
# exit: 1 when a row failed for another reason than memory, else 0.
set -uo pipefail
tprt="${1:?usage: bench_tprt.sh TPRT [STEPS]}"
steps="${2:-30}"
here="$(cd "$(dirname "$0")/../.." && pwd)"
bench="$here/bench/tprt"
python="${PYTHON:-python3}"
warmup=9
seq=1024
if ! [[ "$steps" =~ ^[0-9]+$ ]] || [ "$steps" -le $((warmup + 2)) ]; then
  echo "bench_tprt.sh: STEPS must be above $((warmup + 2)) (steps 1-$warmup are warm-up)"
  exit 2
fi
probe_batches="16 32 64 128 256"
skip=" ${TPRT_BENCH_SKIP:-} "
export CUDA_VISIBLE_DEVICES="${CUDA_VISIBLE_DEVICES:-0}"
work="$(mktemp -d /tmp/bench_tprt.XXXXXX)"
trap '[ -n "${TPRT_BENCH_KEEP:-}" ] || rm -rf "$work"' EXIT
rows="$work/rows.tsv"
: > "$rows"

skipped() { [[ "$skip" == *" $1 "* ]]; }
# Median of the second column over the lines whose first column (a step) is in warmup+1..steps.
median_of_steps() {
  awk -v lo=$((warmup + 1)) -v hi="$steps" '$1 >= lo && $1 <= hi {print $2}' | sort -g |
    awk '{a[NR] = $1} END {if (NR) print (NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2); else print 0}'
}
# system batch tokens/s ms/step status note
add_row() { printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$seq" "$3" "$4" "$5" "${6:-}" >> "$rows"; }
ms_of_tps() { awk -v t="$1" -v n="$(( $2 * seq ))" 'BEGIN {printf("%.2f", t > 0 ? n / t * 1e3 : 0)}'; }
tps_of_ms() { awk -v m="$1" -v n="$(( $2 * seq ))" 'BEGIN {printf("%.0f", m > 0 ? n / m * 1e3 : 0)}'; }
why_failed() { grep -qi 'out of memory' "$1" && echo oom || echo failed; }
field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" | tail -n 1; }

# One tprt row: SYSTEM BATCH [launcher words...] (the launcher runs tprt, e.g. under tpaudit).
tprt_row() {
  local name="$1" b="$2" log="$work/$1-$2.log" t0=$SECONDS
  shift 2
  if timeout 600 "$@" "$tprt" train --model gpt2-124m --device cuda --batch "$b" --seq "$seq" \
       --steps "$steps" --lr 3e-4 > "$log" 2>&1; then
    local tps
    tps=$(awk '/^step / {print $2, $6}' "$log" | median_of_steps)
    add_row "$name" "$b" "$tps" "$(ms_of_tps "$tps" "$b")" ok
    awk '/^step / && ($2 <= 2 || $2 % 10 == 0)' "$log" | sed "s/^/$name ${b}x$seq: /"
    echo "$name ${b}x$seq: run took $(( SECONDS - t0 ))s (model build on the host included)"
  else
    add_row "$name" "$b" 0 0 "$(why_failed "$log")"
    echo "$name ${b}x$seq: $(why_failed "$log"):"; tail -n 5 "$log"
  fi
}
run_tprt() { # batch
  local b="$1"
  tprt_row tprt "$b" env TPAUDIT_AUDIT=none
  # the same run traced by tpaudit (CUPTI, its default audit plan): the shim's overhead is this row's ratio
  if [ -n "${TPAUDIT_BIN:-}" ]; then
    tprt_row tprt-under-tpaudit "$b" "$TPAUDIT_BIN" run -o "$work/audit-$b" --
    "$TPAUDIT_BIN" report "$work/audit-$b" 2>&1 | head -n 3 | sed "s/^/tprt-under-tpaudit ${b}x$seq: /"
  fi
  TPRT_PROFILE=1 TPAUDIT_AUDIT=none timeout 300 "$tprt" train --model gpt2-124m --device cuda --batch "$b" --seq "$seq" \
    --steps 8 --lr 3e-4 2>&1 | grep '^profile:' | sed "s/^/tprt ${b}x$seq /"
}

run_torch() { # batch [--compile]
  local b="$1" name=torch-eager log="$work/torch-$1-$#.log" t0=$SECONDS
  [ $# -gt 1 ] && name=torch-compile
  local extra=()
  read -r -a extra <<< "${TPRT_BENCH_TORCH_ARGS:-}"
  timeout 900 "$python" "$bench/torch_gpt2.py" --batch "$b" --seq "$seq" --steps "$steps" --warmup "$warmup" "${@:2}" \
    "${extra[@]}" > "$log" 2>&1
  local line status seq="$seq"  # add_row takes seq from here: the one the python run reports
  line=$(grep '^median ' "$log" | tail -n 1)
  status=$(echo "$line" | field status)
  [ -n "$(echo "$line" | field seq)" ] && seq=$(echo "$line" | field seq)
  grep '^torch_gpt2:' "$log" | head -n 1
  if [ "$status" = ok ]; then
    local note=""
    [ "$name" = torch-compile ] && note="compile $(echo "$line" | field compile_s) s, not in the median"
    add_row "$name" "$b" "$(echo "$line" | field tokens_per_s)" "$(echo "$line" | field step_ms)" ok "$note"
    echo "$line (run took $(( SECONDS - t0 ))s)"
  else
    [ -z "$status" ] && status=$(why_failed "$log")
    add_row "$name" "$b" 0 0 "$status"
    echo "$name ${b}x$seq: $status:"; grep -v '^\[transformers\]' "$log" | tail -n 5
  fi
}

llmc_shard() { # ntokens: writes the train and val shards once
  [ -f "$work/llmc_train.bin" ] && return 0
  "$python" "$bench/llmc_tokens.py" "$work/llmc_train.bin" "$1" 1 && "$python" "$bench/llmc_tokens.py" "$work/llmc_val.bin" "$1" 2
}

llmc_train() { # batch steps log
  local extra=()
  read -r -a extra <<< "${LLMC_EXTRA:-}"
  # -v: val loss only at steps 0 and last (a 0 would divide by zero), -m 1: one val batch; -s 0: no sampling
  (cd "$work" && timeout 600 "$LLMC_BIN" -e d12 -b "$1" -t "$seq" -x "$2" -r 0 -l 3e-4 -c 0.1 -v 1000000 -m 1 -s 0 \
     -i "$work/llmc_train.bin" -j "$work/llmc_val.bin" "${extra[@]}") > "$3" 2>&1
}

run_llmc() { # batch
  local b="$1" log="$work/llmc-$1.log" t0=$SECONDS
  if llmc_train "$b" "$steps" "$log" && grep -q '^step ' "$log"; then
    local ms note=""
    ms=$(awk '/^step +[0-9]+\/[0-9]+ / {s = $2; sub(/\/.*/, "", s); if (match($0, /[0-9.]+ ms /)) print s, substr($0, RSTART, RLENGTH - 4)}' "$log" |
         median_of_steps)
    grep -q 'Fell back to cudaMallocManaged' "$log" && note="optimizer state in managed memory (device memory short)"
    add_row llm.c "$b" "$(tps_of_ms "$ms" "$b")" "$ms" ok "$note"
    grep -E '^step +([12]|[0-9]*0)/' "$log" | sed "s/^/llm.c ${b}x$seq: /"
    echo "llm.c ${b}x$seq: run took $(( SECONDS - t0 ))s"
  else
    add_row llm.c "$b" 0 0 "$(why_failed "$log")"
    echo "llm.c ${b}x$seq: $(why_failed "$log"):"; tail -n 5 "$log"
  fi
}

llmc_largest_batch() { # prints the largest of probe_batches llm.c trains 3 steps at, all in device memory
  local best="" b
  for b in $probe_batches; do
    if llmc_train "$b" 3 "$work/probe-$b.log" && grep -q '^step ' "$work/probe-$b.log" &&
       ! grep -q 'Fell back to cudaMallocManaged' "$work/probe-$b.log"; then best=$b; else break; fi
  done
  echo "${best:-32}"
}

main() {
  local t_start=$SECONDS have_llmc=""
  echo "bench_tprt: $(date -u +%Y-%m-%dT%H:%MZ), $(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>/dev/null | head -n 1)," \
       "tprt $(git -C "$here" rev-parse --short HEAD 2>/dev/null), GPT-2 124M, T=$seq, median of steps $((warmup + 1))-$steps"
  if skipped llmc; then echo "llm.c: skipped (TPRT_BENCH_SKIP)"
  elif [ -z "${LLMC_BIN:-}" ]; then echo "llm.c: no LLMC_BIN, skipped"
  elif [ ! -x "$LLMC_BIN" ]; then echo "llm.c: $LLMC_BIN is not an executable, skipped"
  else
    have_llmc=1
    local commit
    commit=$(cat "$(dirname "$LLMC_BIN")/COMMIT" 2>/dev/null)
    echo "llm.c: $LLMC_BIN${commit:+ (karpathy/llm.c $commit)}"
    llmc_shard $(( 256 * seq * 4 + 1 )) || { echo "llm.c: could not write the token shards, skipped"; have_llmc=""; }
  fi
  local batches="${TPRT_BENCH_BATCHES:-8 32}"
  if [[ " $batches " == *" auto "* ]]; then
    local largest=32
    if [ -n "$have_llmc" ]; then
      largest=$(llmc_largest_batch)
      echo "llm.c: largest batch without recompute (of $probe_batches): ${largest}x$seq"
    else
      echo "llm.c: absent, batch 'auto' is $largest"
    fi
    batches="${batches/auto/$largest}"
  fi
  local b
  for b in $batches; do
    echo "== batch ${b}x$seq"
    skipped tprt || run_tprt "$b"
    skipped eager || run_torch "$b"
    skipped compile || run_torch "$b" --compile
    [ -n "$have_llmc" ] && run_llmc "$b"
  done
  echo "== table (bench took $(( SECONDS - t_start ))s)"
  "$python" "$bench/bench_table.py" "$rows" || return 1
  ! cut -f6 "$rows" | grep -qx failed
}

if [ -n "${OUT:-}" ]; then
  mkdir -p "$OUT"
  main 2>&1 | tee "$OUT/bench_tprt.txt"
  exit "${PIPESTATUS[0]}"
fi
main
