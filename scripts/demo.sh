#!/usr/bin/env bash
# The main job: audits a real training run with the seed bug's mechanism.
# Installs only what it needs (scripts/setup.sh --demo: the build packages
# and the main venv's torch; scripts/test.sh makes the rest), builds tpaudit
# (the tool, not the tests), runs examples/finetune.py under
# `tpaudit run` in the buggy order (report, HTML report, gate fails), then in
# the fixed order (gate passes), then the buggy order with --fail-fast (stops
# at the step-1 audit, exit status 4). Output lands in ./tpaudit-demo/.
# TPAUDIT_PYTHON_EXE=/path/to/python (one that has torch) uses that python
# and skips creating the project venv (the build packages must be installed).
set -uo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
if [ -n "${TPAUDIT_PYTHON_EXE:-}" ]; then
  python="$TPAUDIT_PYTHON_EXE"
  "$python" -c "import torch" || { echo "demo: $python cannot import torch" >&2; exit 1; }
else
  python="$(bash "$here/scripts/setup.sh" --demo | tail -n 1)" || exit 1
fi
bash "$here/scripts/build.sh" "$python" "$here/build" -DTPAUDIT_TOOL_ONLY=ON || exit 1
tpaudit="$here/build/bin/tpaudit"
out="$here/tpaudit-demo"
rm -rf "$out"; mkdir -p "$out"

echo "== 1. optimizer built before the TP policy pads the vocabulary (the seed bug)"
"$tpaudit" run -o "$out/buggy" -- "$python" "$here/examples/finetune.py" --order buggy
"$tpaudit" report "$out/buggy"
"$tpaudit" report --format html -o "$out/buggy-report.html" "$out/buggy"
"$tpaudit" report --format json -o "$out/buggy-report.json" "$out/buggy"
echo "HTML report: $out/buggy-report.html"
"$tpaudit" gate --max-retained 0 "$out/buggy"
buggy_gate=$?
echo "gate exit status: $buggy_gate (1 = failed, as it must)"

echo
echo "== 2. the same script with the policy applied before the optimizer"
"$tpaudit" run -o "$out/fixed" -- "$python" "$here/examples/finetune.py" --order fixed
"$tpaudit" report "$out/fixed"
"$tpaudit" gate --max-retained 0 "$out/fixed"
fixed_gate=$?
echo "gate exit status: $fixed_gate (0 = passed)"

echo
echo "== 3. the buggy order with --fail-fast: it stops at the step-1 audit, before training on"
"$tpaudit" run --fail-fast -o "$out/fail-fast" -- "$python" "$here/examples/finetune.py" --order buggy
fast_status=$?
echo "run exit status: $fast_status (4 = stopped by --fail-fast)"

[ "$buggy_gate" = 1 ] && [ "$fixed_gate" = 0 ] && [ "$fast_status" = 4 ]
