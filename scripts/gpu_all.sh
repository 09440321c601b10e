#!/usr/bin/env bash
# Builds tpaudit and runs every GPU test and benchmark in one call, on a
# machine with an NVIDIA GPU (the project's device runs). Results and logs go
# under $OUT (default ./gpu-out). Each part is a script of its own; a part
# that fails is reported and the others still run. Ends with a summary table.
set -uo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
export OUT="${OUT:-$here/gpu-out}"
mkdir -p "$OUT"
cd "$here"
[ -f scripts/device_env.sh ] && source scripts/device_env.sh
summary=()
for part in gpu_cupti gpu_tprt; do
  script="scripts/$part.sh"
  [ -f "$script" ] || { summary+=("$part: missing"); continue; }
  start=$(date +%s)
  bash "$script" > "$OUT/$part.log" 2>&1
  rc=$?
  summary+=("$part: exit $rc in $(( $(date +%s) - start ))s")
  tail -n 40 "$OUT/$part.log"
done
echo "== GPU summary"
printf '%s\n' "${summary[@]}" | tee "$OUT/summary.txt"
