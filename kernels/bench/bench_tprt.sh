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
#                 (both: kernels/bench/torch_gpt2.py, one process per row)
#   llm.c         karpathy/llm.c train_gpt2cu, random init (-e d12), no
#                 recompute (-r 0), on a synthetic token shard, when LLMC_BIN
#                 names a built binary (kernels/bench/build_llmc.sh), built
#                 without cuDNN (llm.c's own attention kernels)
#   llm.c-cudnn   the same built with USE_CUDNN=1 (cuDNN's flash attention,
#                 llm.c's fast path), when LLMC_CUDNN_BIN names that binary
# Every row: the median over steps 10..STEPS (1-9 are warm-up) of per-step
# times; a batch that does not fit is an "oom" row, not a failed bench.
# Prints one table (kernels/bench/bench_table.py: tprt's ratio, MFU and its FLOP
# count) and a `bench_tprt_row {json}` line per row; with OUT set, the whole
# output also goes to $OUT/bench_tprt.txt.
# usage: kernels/bench/bench_tprt.sh TPRT [STEPS (30)]
# env: TPRT_BENCH_BATCHES="8 32" (a word "auto": the largest power of two up to
#      256 that llm.c trains without recompute and with all its buffers in
#      device memory, probed from 256 down, 3 steps each, with the build
#      TPRT_BENCH_PROBE names: "cudnn" (the default when LLMC_CUDNN_BIN is
#      set; it stores no T x T attention, so it fits the larger batch),
#      "plain" (LLMC_BIN), or "both": each build's largest, both batches run),
#      LLMC_BIN, LLMC_CUDNN_BIN, LLMC_EXTRA (more llm.c flags, both builds),
#      TPRT_BENCH_SKIP="tprt eager compile llmc llmc-cudnn" (systems to leave out),
#      PYTHON (python3), TPRT_BENCH_TORCH_ARGS (more torch_gpt2.py flags; a check
#      off the GPU: "--device cpu --tiny").
#      TPRT_BENCH_COMMIT (the commit the header names, for a copied tree whose
#      own git HEAD is not the one built).
# exit: 1 when a row failed for another reason than memory, else 0.
set -uo pipefail
tprt="${1:?usage: bench_tprt.sh TPRT [STEPS]}"
steps="${2:-30}"
here="$(cd "$(dirname "$0")/../.." && pwd)"
bench="$here/kernels/bench"
# shellcheck source=kernels/bench/median.sh
. "$bench/median.sh"
python="${PYTHON:-python3}"
warmup=9
seq=1024
if ! [[ "$steps" =~ ^[0-9]+$ ]] || [ "$steps" -le $((warmup + 2)) ]; then
  echo "bench_tprt.sh: STEPS must be above $((warmup + 2)) (steps 1-$warmup are warm-up)"
  exit 2
fi
probe_batches="256 128 64 32 16"  # largest first: the first that fits ends the probe
skip=" ${TPRT_BENCH_SKIP:-} "
export CUDA_VISIBLE_DEVICES="${CUDA_VISIBLE_DEVICES:-0}"
work="$(mktemp -d /tmp/bench_tprt.XXXXXX)"
trap '[ -n "${TPRT_BENCH_KEEP:-}" ] || rm -rf "$work"' EXIT
rows="$work/rows.tsv"
: > "$rows"

skipped() { [[ "$skip" == *" $1 "* ]]; }
# Median of the second column over the lines whose first column (a step) is in warmup+1..steps.
median_of_steps() {
  awk -v lo=$((warmup + 1)) -v hi="$steps" '$1 >= lo && $1 <= hi {print $2}' | median
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

llmc_train() { # binary batch steps log
  local extra=()
  read -r -a extra <<< "${LLMC_EXTRA:-}"
  # -v: val loss only at steps 0 and last (a 0 would divide by zero), -m 1: one val batch; -s 0: no sampling
  (cd "$work" && timeout 600 "$1" -e d12 -b "$2" -t "$seq" -x "$3" -r 0 -l 3e-4 -c 0.1 -v 1000000 -m 1 -s 0 \
     -i "$work/llmc_train.bin" -j "$work/llmc_val.bin" "${extra[@]}") > "$4" 2>&1
}

run_llmc() { # system binary batch
  local name="$1" bin="$2" b="$3" log="$work/$1-$3.log" t0=$SECONDS
  if llmc_train "$bin" "$b" "$steps" "$log" && grep -q '^step ' "$log"; then
    local ms note=""
    ms=$(awk '/^step +[0-9]+\/[0-9]+ / {s = $2; sub(/\/.*/, "", s); if (match($0, /[0-9.]+ ms /)) print s, substr($0, RSTART, RLENGTH - 4)}' "$log" |
         median_of_steps)
    grep -q 'Fell back to cudaMallocManaged' "$log" && note="optimizer state in managed memory (device memory short)"
    add_row "$name" "$b" "$(tps_of_ms "$ms" "$b")" "$ms" ok "$note"
    grep -E '^step +([12]|[0-9]*0)/' "$log" | sed "s/^/$name ${b}x$seq: /"
    echo "$name ${b}x$seq: run took $(( SECONDS - t0 ))s"
  else
    add_row "$name" "$b" 0 0 "$(why_failed "$log")"
    echo "$name ${b}x$seq: $(why_failed "$log"):"; tail -n 5 "$log"
  fi
}

llmc_largest_batch() { # system binary: prints the largest of probe_batches it trains 3 steps at, all in device memory
  local b log
  for b in $probe_batches; do
    log="$work/probe-$1-$b.log"
    if llmc_train "$2" "$b" 3 "$log" && grep -q '^step ' "$log"; then
      grep -q 'Fell back to cudaMallocManaged' "$log" || { echo "$b"; return 0; }
    elif [ "$(why_failed "$log")" != oom ]; then
      { echo "$1: the probe at ${b}x$seq failed (not for memory), batch 'auto' is 32:"; tail -n 5 "$log"; } >&2
      break
    fi
  done
  echo 32
}

# Checks one llm.c binary (system binary); prints what it is; status 0 when usable.
llmc_usable() {
  if skipped "${1/llm.c/llmc}"; then echo "$1: skipped (TPRT_BENCH_SKIP)"; return 1; fi
  if [ -z "$2" ]; then echo "$1: no binary given, skipped"; return 1; fi
  if [ ! -x "$2" ]; then echo "$1: $2 is not an executable, skipped"; return 1; fi
  local dir commit
  dir=$(dirname "$2")
  commit=$(cat "$dir/COMMIT" 2>/dev/null)
  echo "$1: $2${commit:+ (karpathy/llm.c $commit)}${3:+, $3}"
}

# The batches of TPRT_BENCH_BATCHES with "auto" replaced by the probe's answer.
resolve_batches() {
  local batches="${TPRT_BENCH_BATCHES:-8 32}"
  if [[ " $batches " != *" auto "* ]]; then echo "$batches"; return; fi
  local mode="${TPRT_BENCH_PROBE:-cudnn}" largest=() name bin
  [ -z "$have_cudnn" ] && [ "$mode" = cudnn ] && mode=plain
  for name in llm.c llm.c-cudnn; do
    bin="${LLMC_BIN:-}" && [ "$name" = llm.c-cudnn ] && bin="${LLMC_CUDNN_BIN:-}"
    case "$mode:$name" in both:*|plain:llm.c|cudnn:llm.c-cudnn) ;; *) continue ;; esac
    if { [ "$name" = llm.c ] && [ -z "$have_llmc" ]; } || { [ "$name" = llm.c-cudnn ] && [ -z "$have_cudnn" ]; }; then continue; fi
    largest+=("$(llmc_largest_batch "$name" "$bin")")
    echo "$name: largest batch without recompute (of $probe_batches): ${largest[-1]}x$seq" >&2
  done
  [ ${#largest[@]} = 0 ] && { echo "llm.c: absent, batch 'auto' is 32" >&2; largest=(32); }
  local b out=""
  for b in ${batches/auto/$(printf '%s\n' "${largest[@]}" | sort -nu | tr '\n' ' ')}; do
    [[ " $out " == *" $b "* ]] || out+="$b "
  done
  echo "$out"
}

main() {
  local t_start=$SECONDS
  have_llmc="" have_cudnn=""
  echo "bench_tprt: $(date -u +%Y-%m-%dT%H:%MZ), $(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>/dev/null | head -n 1)," \
       "tprt ${TPRT_BENCH_COMMIT:-$(git -C "$here" rev-parse --short HEAD 2>/dev/null)}, GPT-2 124M, T=$seq, median of steps $((warmup + 1))-$steps"
  llmc_usable llm.c "${LLMC_BIN:-}" "without cuDNN" && have_llmc=1
  llmc_usable llm.c-cudnn "${LLMC_CUDNN_BIN:-}" \
    "USE_CUDNN=1: $(cat "$(dirname "${LLMC_CUDNN_BIN:-.}")/CUDNN" 2>/dev/null || echo 'cuDNN of unknown version')" && have_cudnn=1
  if [ -n "$have_llmc$have_cudnn" ] && ! llmc_shard $(( 256 * seq * 4 + 1 )); then
    echo "llm.c: could not write the token shards, both builds skipped"; have_llmc="" have_cudnn=""
  fi
  local batches b
  batches=$(resolve_batches)
  for b in $batches; do
    echo "== batch ${b}x$seq"
    skipped tprt || run_tprt "$b"
    skipped eager || run_torch "$b"
    skipped compile || run_torch "$b" --compile
    [ -n "$have_llmc" ] && run_llmc llm.c "$LLMC_BIN" "$b"
    [ -n "$have_cudnn" ] && run_llmc llm.c-cudnn "$LLMC_CUDNN_BIN" "$b"
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
