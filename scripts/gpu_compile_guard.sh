#!/usr/bin/env bash
# GPU part of scripts/gpu_all.sh (TPAUDIT_GPU_PARTS=gpu_compile_guard): HF
# GPT-2 124M under torch.compile, batch 8 x 1024 (bench/gpu/gpt2_step.py --compile),
# without tpaudit and under `tpaudit run`, with
# TORCH_LOGS=graph_breaks,recompiles.  Prints dynamo's counters, the
# recompile and graph-break records of each log and the step times; exit 1
# when the counters or the record counts differ.  Results in $OUT/compile_guard.
set -uo pipefail
build="${TPAUDIT_GPU_BUILD:?}"
res="$OUT/compile_guard"
mkdir -p "$res"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
export TORCH_LOGS=graph_breaks,recompiles
python3 bench/gpu/gpt2_step.py --compile > "$res/plain.out" 2> "$res/plain.log"
plain_rc=$?
"$build/bin/tpaudit" run --force -o "$res/db" -- python3 bench/gpu/gpt2_step.py --compile > "$res/tpaudit.out" 2> "$res/tpaudit.log"
tpa_rc=$?
rc=0
for run in plain tpaudit; do
  recompiles=$(grep -c "Recompiling function" "$res/$run.log")
  breaks=$(grep -ci "graph break" "$res/$run.log")
  echo "$run: exit $([ $run = plain ] && echo $plain_rc || echo $tpa_rc), log: $recompiles recompile records, $breaks graph-break records"
  grep -E "^(dynamo|median_step_ms)" "$res/$run.out" | sed 's/^/  /'
  echo "$recompiles $breaks $(grep '^dynamo' "$res/$run.out")" > "$res/$run.counts"
done
if [ "$plain_rc" != 0 ] || [ "$tpa_rc" != 0 ]; then rc=1; fi
if ! cmp -s "$res/plain.counts" "$res/tpaudit.counts"; then
  echo "DIFFERENT: tpaudit changed what torch.compile did"
  rc=1
else
  echo "same counters and records with and without tpaudit"
fi
plain_ms=$(awk '/median_step_ms/{print $2}' "$res/plain.out")
tpa_ms=$(awk '/median_step_ms/{print $2}' "$res/tpaudit.out")
[ -n "$plain_ms" ] && [ -n "$tpa_ms" ] && python3 -c "print(f'step ratio tpaudit/plain: {$tpa_ms / $plain_ms:.3f}x')"
exit "$rc"
