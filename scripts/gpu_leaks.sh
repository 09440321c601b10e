#!/usr/bin/env bash
# Leaks part of scripts/gpu_all.sh: memory_growth and the memory ledger on one
# GPU. Three GPT-2 loops that keep device memory every step, each beside its
# twin (tests/gpu/leaks/gpt2_leaks.py), run unmodified under `tpaudit run`
# with the default audit plan and judged by tests/gpu/leaks/judge.py:
#   logits      10 and 60 steps keeping out.logits (GPT-2 124M; a CI run's
#               10 steps must be caught too), and the 4-layer loop that grows
#               0.45 -> 12 GiB in 60, vs keeping argmax().cpu(); the 4-layer
#               run's HTML report is kept as $OUT/leaks-logits-4layer.html
#               (for a screenshot)
#   hook        a forward hook keeping the last block's activations vs a summary
#   total_loss  `total_loss += loss` with retain_graph=True vs loss.item()
#   module      (tests/gpu/leaks/gpt2_loops.py) a module-level loop keeping out.logits, its
#               global `out` binding the newest, at 10 and 20 steps (GPT-2 124M)
#   eval        a module-level eval loop under no_grad with no optimizer at all, and
#   eval_function  the same in a function, each keeping every batch's logits for 10
#               steps vs a deque(maxlen=6)
#   generate    a function's loop of 10 `generate` calls keeping each output (its logits
#               and KV cache) vs a deque(maxlen=6): the model is called by transformers only
# Each: the finding (holder, line, rate within 5% of the kept tensors'
# per-step rise where the program counts them, else memory_allocated()'s),
# the ledger's held-by row against the
# device growth memory_allocated() shows (within 5%), the ledger's owners
# against CUPTI's measured total (within 1%), the twin clean. Then the GPT-2
# 124M step with leak detection on against the plain step
# (bench/gpu/leak_overhead.sh). Writes $OUT/leaks.md (the table) and one
# directory and log per run under $OUT/leaks/; exits 1 when a check failed.
# LEAK_CASES="logits-124M-10 logits-124M bench ..." runs only those parts
# (the labels below, fail-fast, bench); default: all.
set -uo pipefail
build="${TPAUDIT_GPU_BUILD:?}"
tpaudit="$build/bin/tpaudit"
out="${OUT:?}/leaks"
mkdir -p "$out"
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false PYTHONWARNINGS=ignore
table="$OUT/leaks.md"
{ echo "leaks on $(nvidia-smi -L 2>/dev/null | head -1), $(date -u +%F), torch $(python3 -c 'import torch; print(torch.__version__)')"
  echo; echo "| case | finding | created at | held-by row vs memory_allocated() growth | memory_allocated() leak; twin | twin |"
  echo "|---|---|---|---|---|---|"; } > "$table"
status=0
want() { [ -z "${LEAK_CASES:-}" ] || [[ " $LEAK_CASES " == *" $1 "* ]]; }
audited() {  # name, args of gpt2_leaks.py...
  local name=$1; shift
  rm -rf "${out:?}/$name"
  timeout 600 "$tpaudit" run -o "$out/$name" -- python3 "${script:-tests/gpu/leaks/gpt2_leaks.py}" "$@" \
    > "$out/$name.log" 2> "$out/$name.err"
  echo "$name: exit $?; $(grep -h '^tpaudit: verdict' "$out/$name.err")"
  "$tpaudit" report "$out/$name" > "$out/$name.report.txt" 2>&1
}
case_pair() {  # label, case, args...
  local label=$1 case=$2; shift 2
  audited "$label" "$case" "$@"
  audited "$label-twin" "$case" --twin "$@"
  python3 tests/gpu/leaks/judge.py "$label" "$case" "$out/$label" "$out/$label.log" "$out/$label-twin" \
    "$out/$label-twin.log" "$tpaudit" | tee "$out/$label.judge"
  [ "${PIPESTATUS[0]}" = 0 ] || status=1
  grep '^| ' "$out/$label.judge" >> "$table"
  "$tpaudit" gate --max-growth 1MiB "$out/$label" > "$out/$label.gate" 2>&1
  echo "gate --max-growth 1MiB $label: exit $? (1 expected); twin: $("$tpaudit" gate --max-growth 1MiB "$out/$label-twin" \
    > /dev/null 2>&1; echo "exit $?") (0 expected)"
}
want logits-124M-10 && case_pair logits-124M-10 logits --steps 10 --layers 12
want logits-124M && case_pair logits-124M logits --steps 60 --layers 12
want logits-4layer && case_pair logits-4layer logits --steps 60 --layers 4
want logits-4layer && "$tpaudit" report --format html -o "$OUT/leaks-logits-4layer.html" "$out/logits-4layer" \
  && echo "html: $OUT/leaks-logits-4layer.html ($(wc -c < "$OUT/leaks-logits-4layer.html") bytes)"
want hook-124M && case_pair hook-124M hook --steps 60 --layers 12
want total_loss-4layer && case_pair total_loss-4layer total_loss --steps 60 --layers 4
loops=tests/gpu/leaks/gpt2_loops.py  # issue 49: module-level loops and loops with no optimizer
want module-124M-10 && script=$loops case_pair module-124M-10 module --steps 10
want module-124M-20 && script=$loops case_pair module-124M-20 module --steps 20
want eval-124M-10 && script=$loops case_pair eval-124M-10 eval --steps 10
want eval_function-124M-10 && script=$loops case_pair eval_function-124M-10 eval_function --steps 10
want generate-124M-10 && script=$loops case_pair generate-124M-10 generate --steps 10
# --fail-fast: the 124M logits loop stops at the first audit that proves growth
want fail-fast && { rm -rf "$out/fail-fast"
"$tpaudit" run --fail-fast -o "$out/fail-fast" -- python3 tests/gpu/leaks/gpt2_leaks.py logits --steps 60 \
  > "$out/fail-fast.log" 2> "$out/fail-fast.err"
echo "fail-fast logits-124M: exit $? (4 expected): $(grep -h 'memory_growth' "$out/fail-fast.err" | head -1)"; }
want bench && { echo "== bench: GPT-2 124M step, leak detection on vs plain"
bash bench/gpu/leak_overhead.sh 2>&1 | tee "$out/bench.log"
grep -h '^gpt2 124M step median' "$out/bench.log" | sed 's/^/bench: /' >> "$table"; }
echo
cat "$table"
grep -h '^check: .*FAIL' "$out"/*.judge
exit $status
