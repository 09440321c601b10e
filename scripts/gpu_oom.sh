#!/usr/bin/env bash
# OOM part of scripts/gpu_all.sh (TPAUDIT_GPU_PARTS=gpu_oom): runs that die
# of (or catch) a CUDA out-of-memory on one GPU, each run unmodified with and
# without tpaudit, comparing the program's stderr (less the documented
# `tpaudit:` lines) and its exit status, then the finding each must give
# (tests/gpu/oom/judge.py):
#   logits  keeps each step's logits until the cap: out_of_memory, cause growth, names `kept`
#   logits_compiled  the same through torch.compile(model): the same finding, name and line
#   batch   one step far too large: out_of_memory, cause step_peak (no holder)
#   frag    8 MiB holes, 256 MiB asked: cause fragmentation; the same program with
#           PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True exits 0
#   finder  a batch-size finder that catches the OOM: no out_of_memory, caught_out_of_memory warnings
#   tprt    tprt train --batch 512 --seq 1024 (about 228 GB of activations): the native path,
#           out_of_memory whose native stack names tprt's own allocation (gpt2_cuda.c)
# The cases cap the process with set_per_process_memory_fraction (CAP_GIB=6),
# so each runs out within seconds.  Then the GPT-2 124M step with the
# allocator's OOM observer attached against the plain step (bench/gpu/oom_observer.sh).
# Saves $OUT/oom/fixtures/<case>.db (each case's database of the runs
# oom_checks.FIXTURE_CASES names, compacted) for the lead to commit under
# tests/analyzer/fixtures/oom/ (tests/analyzer/test_oom_fixtures.py checks
# them in CI), and $OUT/oom.md (the summary); exits 1 when a check failed.
# About 5 minutes on an H100.
set -uo pipefail
build="${TPAUDIT_GPU_BUILD:?}"
tpaudit="$build/bin/tpaudit"
out="${OUT:?}/oom"
rm -rf "$out"
mkdir -p "$out"
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false PYTHONWARNINGS=ignore CAP_GIB="${CAP_GIB:-6}"
summary="$OUT/oom.md"
{ echo "oom on $(nvidia-smi -L 2>/dev/null | head -1), $(date -u +%F), torch $(python3 -c 'import torch; print(torch.__version__)')"
  echo; } > "$summary"
status=0
# both NAME CMD...: CMD plain, then under tpaudit; exit statuses and stderr compared
both() {
  local name=$1; shift
  timeout 300 "$@" > "$out/$name.plain.out" 2> "$out/$name.plain.err"
  local plain=$?
  timeout 300 "$tpaudit" run -o "$out/$name" -- "$@" > "$out/$name.tpa.out" 2> "$out/$name.tpa.err"
  local audited=$?
  grep -v '^tpaudit: ' "$out/$name.tpa.err" > "$out/$name.tpa.err.program"
  local same="identical"
  if ! cmp -s "$out/$name.plain.err" "$out/$name.tpa.err.program"; then
    # the allocator's message counts bytes; say whether only numbers differ
    if diff <(sed 's/[0-9.]\+/N/g' "$out/$name.plain.err") <(sed 's/[0-9.]\+/N/g' "$out/$name.tpa.err.program") > /dev/null; then
      same="differs in numbers only"
      diff "$out/$name.plain.err" "$out/$name.tpa.err.program" | grep '^[<>]' | cut -c1-400 | sed 's/^/    /'
      grep -h '^allocator_at_exit' "$out/$name.plain.out" "$out/$name.tpa.out" | cut -c1-400 | sed 's/^/    /'
    else
      same="DIFFERS"; status=1
    fi
  fi
  [ "$plain" = "$audited" ] || status=1
  echo "| $name | exit $plain plain, $audited under tpaudit | stderr (less tpaudit: lines) $same |" | tee -a "$summary"
  "$tpaudit" report "$out/$name" > "$out/$name.report.txt" 2>&1
  "$tpaudit" report --format json "$out/$name" > "$out/$name.json" 2> /dev/null
  "$tpaudit" report --format html -o "$out/$name.html" "$out/$name" > /dev/null 2>&1
  grep -h '^verdict' "$out/$name.report.txt" | head -2 | sed 's/^/    /' | tee -a "$summary"
}
cases=tests/gpu/oom/gpu_oom_cases.py
# OOM_CASES="logits_compiled bench ..." runs only those (the names below,
# tprt, bench; the judge then fails the cases not run); default: all.
all="logits logits_compiled list-module losses eval-module eval-function batch batch-backward frag pin-thread finder tprt bench"
want() { [[ " ${OOM_CASES:-$all} " == *" $1 "* ]]; }
for case in logits logits_compiled list-module losses eval-module eval-function batch batch-backward frag pin-thread finder; do
  want "$case" && both "$case" python3 "$cases" "$case"
done
want frag && { PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True timeout 300 python3 "$cases" frag > "$out/frag-expandable.out" 2>&1
echo "| frag with expandable_segments:True | exit $? (0 expected) |" | tee -a "$summary"; }
want tprt && both tprt "$build/bin/tprt" train --model gpt2-124m --device cuda --steps 2 --batch 512 --seq 1024
python3 tests/gpu/oom/judge.py "$out" "$tpaudit" | tee -a "$summary"
[ "${PIPESTATUS[0]}" = 0 ] || status=1
mkdir -p "$out/fixtures"
for case in $(python3 -c 'import sys; sys.path.insert(0, "tests/gpu/oom"); import oom_checks; print(*oom_checks.FIXTURE_CASES)'); do
  db=$(ls "$out/$case"/*.db 2>/dev/null | head -1)
  [ -n "$db" ] || continue
  python3 - "$db" "$out/fixtures/$case.db" <<'EOF'
import sqlite3, sys
src = sqlite3.connect(sys.argv[1])
src.execute("VACUUM INTO ?", (sys.argv[2],))  # one file, WAL folded in, compacted
EOF
  echo "fixture: $out/fixtures/$case.db ($(du -k "$out/fixtures/$case.db" | cut -f1) KiB)" | tee -a "$summary"
done
want bench && { echo "== bench: GPT-2 124M step, OOM observer attached vs plain"
bash bench/gpu/oom_observer.sh 2>&1 | tee "$out/bench.log"
grep -h '^gpt2 124M step median' "$out/bench.log" | sed 's/^/bench: /' >> "$summary"; }
echo
cat "$summary"
exit $status
