#!/usr/bin/env bash
# GPT-2 124M training step (bench/gpu/gpt2_step.py: batch 8 x 1024, bf16
# autocast, AdamW) with tpaudit's leak detection on (the default: a live-bytes
# sample at every optimizer step, growth audits only when samples grow)
# against the plain step, against tpaudit with TPAUDIT_LEAKS=off, and with
# `tpaudit run --peak` (leak detection, the audits inside backward of the
# planned steps 1 and 2, and the phase marks of every step: docs/PROBE.md).
# The four run alternated, ROUNDS rounds (default 5) of STEPS steps (default
# 60); each prints its per-step median (steps 6 on), and the figures are the
# medians of the rounds and their ratios.  Start-up is not timed (a process's
# start varies by about a second on the H200: per-step medians only).
# Usage: TPAUDIT_GPU_BUILD=build-gpu bench/gpu/leak_overhead.sh
set -uo pipefail
build="${TPAUDIT_GPU_BUILD:?}"
here="$(cd "$(dirname "$0")" && pwd)"
rounds="${ROUNDS:-5}" steps="${STEPS:-60}"
work="$(mktemp -d)"
step_ms() { awk '/median_step_ms/{print $2}'; }
plain=() leaks=() off=() peak=()
for round in $(seq 1 "$rounds"); do
  p=$(python3 "$here/gpt2_step.py" --steps "$steps" 2>/dev/null | step_ms)
  l=$("$build/bin/tpaudit" run --force -o "$work/on" -- python3 "$here/gpt2_step.py" --steps "$steps" 2>/dev/null | step_ms)
  o=$(TPAUDIT_LEAKS=off "$build/bin/tpaudit" run --force -o "$work/off" -- python3 "$here/gpt2_step.py" --steps "$steps" \
      2>/dev/null | step_ms)
  k=$("$build/bin/tpaudit" run --force --peak -o "$work/peak" -- python3 "$here/gpt2_step.py" --steps "$steps" 2>/dev/null | step_ms)
  echo "round $round: plain ${p:-?} ms, tpaudit leak detection on ${l:-?} ms, tpaudit TPAUDIT_LEAKS=off ${o:-?} ms," \
       "tpaudit --peak ${k:-?} ms"
  plain+=("${p:-nan}") leaks+=("${l:-nan}") off+=("${o:-nan}") peak+=("${k:-nan}")
done
samples=$(sqlite3 "$work"/on/*.db "select count(*) from sample" 2>/dev/null || echo "?")
growth=$(sqlite3 "$work"/on/*.db "select count(*) from audit where label='growth'" 2>/dev/null || echo "?")
echo "last leak-detection run: $samples samples, $growth growth audits (a loop that keeps nothing: 0 expected)"
marks=$(sqlite3 "$work"/peak/*.db "select count(*) from phase_mark" 2>/dev/null || echo "?")
echo "last --peak run: $marks phase marks (4 a step)"
python3 - "${plain[*]}" "${leaks[*]}" "${off[*]}" "${peak[*]}" <<'EOF'
import statistics, sys
plain, on, off, peak = ([float(v) for v in arg.split()] for arg in sys.argv[1:5])
med = [statistics.median(v) for v in (plain, on, off, peak)]
print(f"gpt2 124M step median of {len(plain)} rounds: plain {med[0]:.2f} ms, leak detection on {med[1]:.2f} ms "
      f"({med[1] / med[0]:.3f}x plain), TPAUDIT_LEAKS=off {med[2]:.2f} ms ({med[2] / med[0]:.3f}x plain); "
      f"leak detection itself {med[1] / med[2]:.3f}x (target: on within 1.01x of plain)")
print(f"tpaudit run --peak {med[3]:.2f} ms ({med[3] / med[0]:.3f}x plain; its backward audits are at steps 1 "
      f"and 2, before the median's steps: the marks of every step are in it)")
print("per-round ratios on/plain: " + " ".join(f"{b / a:.3f}" for a, b in zip(plain, on)))
print("per-round ratios --peak/plain: " + " ".join(f"{b / a:.3f}" for a, b in zip(plain, peak)))
EOF
rm -rf "$work"
