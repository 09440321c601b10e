#!/usr/bin/env bash
# ColossalAI part of scripts/gpu_all.sh: tests/frameworks/test_colossal.py on
# the GPU, with ColossalAI's CUDA accelerator and nothing changed in it:
# HybridParallelPlugin, TP=2 (torchrun, 2 ranks), GPT-2 from a config, fp32
# and bf16, tied and untied, correct runs and the old GPT-2 policy's resize
# put back, each under `tpaudit run`, judged per rank by the test and listed
# with `tpaudit report --format json` and `tpaudit gate`. With fewer GPUs
# than ranks the ranks share GPU 0 (scenarios/colossal_hybrid.py says how).
# Wheels come from .carry/whl-colossal (scripts/device_prep.sh) and shadow
# the machine's transformers for this part alone. Writes $OUT/colossal.md
# (the table) and $OUT/colossal-pytest.log.
set -uo pipefail
build="${TPAUDIT_GPU_BUILD:?}"
tpaudit="$build/bin/tpaudit"
site=/tmp/site-colossal
python3 -m pip install -q --no-index --no-deps --no-compile --target "$site" .carry/whl-colossal/*.whl ||
  { echo "gpu_colossal: no wheels in .carry/whl-colossal (scripts/device_prep.sh)"; exit 1; }
export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}" HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export TPAUDIT_TEST_LIB="$build/lib/libtpaudit.so" TPAUDIT_COLOSSAL_PYTHON="$(command -v python3)"
export TPAUDIT_COLOSSAL_DEVICE=cuda  # the test then also holds the findings' tensors to the GPU
tmp=/tmp/colossal-runs
rm -rf "$tmp"
parallel=()
python3 -c 'import xdist' 2>/dev/null && parallel=(-n 8)
(cd tests/frameworks && timeout 300 python3 -m pytest -p no:cacheprovider -v -rs "${parallel[@]}" \
  --basetemp "$tmp" test_colossal.py) 2>&1 | tee "$OUT/colossal-pytest.log"
rc=${PIPESTATUS[0]}

table="$OUT/colossal.md"
versions=$(python3 -c "
import importlib.metadata as m
print('; '.join('%s %s' % (p, m.version(p)) for p in ('torch', 'colossalai', 'transformers')))")
{ echo "ColossalAI on $(nvidia-smi -L 2>/dev/null | head -1), $(date -u +%F): $versions; pytest exit $rc"
  echo; echo "| run | findings | stale tensors (name, retained bytes -> live successor) | gate |"
  echo "|---|---|---|---|"; } > "$table"
for dir in "$tmp"/*/colossal_hybrid-* "$tmp"/*/*/colossal_hybrid-*; do  # */*/: under pytest-xdist
  [ -d "$dir" ] && [ ! -L "$(dirname "$dir")" ] || continue  # pytest's *current links
  "$tpaudit" gate "$dir" > /dev/null 2>&1
  gate_rc=$?
  "$tpaudit" report --format json "$dir" 2> /dev/null |
    python3 tests/gpu/frameworks/verdict.py "$(basename "$dir")" "$gate_rc" >> "$table"
  "$tpaudit" report --format json "$dir" 2> /dev/null | python3 -c "
import json, sys
doc = json.load(sys.stdin)
ranks = ['rank %s: %d audits, cupti %s' % (r['rank'], r['audits'], r['cupti'].split(':')[0])
         for r in doc['runs'] if r['rank'] is not None]
devices = sorted({f['tensor']['device'] for f in doc['findings']})
print('    %s: %s%s' % (sys.argv[1], '; '.join(ranks), ', findings on ' + ', '.join(devices) if devices else ''))
" "$(basename "$dir")" >> "$OUT/colossal-ranks.txt"
done
cat "$table" "$OUT/colossal-ranks.txt" 2> /dev/null
exit "$rc"
