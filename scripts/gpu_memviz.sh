#!/usr/bin/env bash
# Memory-viz part of scripts/gpu_all.sh (TPAUDIT_GPU_PARTS=gpu_memviz): two
# GPU runs under `tpaudit run`, each exported as PyTorch's memory snapshot
# (`tpaudit report --format memory-viz`) and checked by
# tests/gpu/memviz_check.py (torch.cuda._memory_viz's segments, memory,
# trace_plot; tiling, categories; the case's own band):
#   leak   tests/gpu/leaks/gpt2_leaks.py logits --steps 60 --layers 4 (a list
#          keeps out.logits every step: the held band must grow)
#   seed   examples/finetune.py --order buggy (the stale embedding)
# Leaves under $OUT/memviz/: <case>.pickle (at most 16 MB: --max-events),
# <case>.html (the HTML report with its owner timeline), the run's
# databases as <case>-<n>.db (candidates for tests/analyzer/fixtures/gpu/),
# and $OUT/memviz.md, the table.  Exits 1 when a check failed.  About 2 minutes.
set -uo pipefail
tpaudit="${TPAUDIT_GPU_BUILD:?}/bin/tpaudit" out="${OUT:?}/memviz" table="${OUT:?}/memviz.md"
mkdir -p "$out"
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false PYTHONWARNINGS=ignore
cat > "$table" <<TABLE
memory-viz on $(nvidia-smi -L 2>/dev/null | head -1), $(date -u +%F), torch $(python3 -c 'import torch; print(torch.__version__)')

| case | file | size | export | entries | audits | segments | alloc entries by category |
|---|---|---|---|---|---|---|---|
TABLE
status=0
exported() {  # case, script and its arguments...
  local case=$1; shift
  rm -rf "${out:?}/$case" "$out/$case".pickle "$out/$case".*.pickle
  timeout 300 "$tpaudit" run -o "$out/$case" -- python3 "$@" > "$out/$case.log" 2> "$out/$case.err"
  echo "$case: run exit $?; $(grep -h '^tpaudit: verdict' "$out/$case.err" | head -1)"
  local t0 t1
  t0=$(date +%s.%N)
  "$tpaudit" report --format memory-viz --max-events 60000 -o "$out/$case.pickle" "$out/$case" 2> "$out/$case.export.err"
  local rc=$?
  t1=$(date +%s.%N)
  echo "$case: export exit $rc in $(python3 -c "print(f'{$t1 - $t0:.2f}')") s; $(cat "$out/$case.export.err")"
  [ "$rc" = 0 ] || status=1
  "$tpaudit" report -o "$out/$case.html" "$out/$case" || status=1
  local n=0
  for db in "$out/$case"/*.db; do n=$((n + 1)); cp "$db" "$out/$case-$n.db"; done
  for f in "$out/$case".pickle "$out/$case".*.pickle; do
    [ -f "$f" ] || continue
    python3 tests/gpu/memviz_check.py "$case" "$f" "$(python3 -c "print($t1 - $t0)")" | tee "$out/$case.check"
    [ "${PIPESTATUS[0]}" = 0 ] || status=1
    grep '^| ' "$out/$case.check" >> "$table"
    [ "$(stat -c %s "$f")" -lt 16000000 ] || { echo "check: $case: $f over 16 MB: FAIL"; status=1; }
  done
}
exported leak tests/gpu/leaks/gpt2_leaks.py logits --steps 60 --layers 4
exported seed examples/finetune.py --order buggy --steps 5 --device cuda
ls -la "$out"
echo
cat "$table"
grep -h '^check: .*FAIL' "$out"/*.check
exit $status
