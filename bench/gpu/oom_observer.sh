#!/usr/bin/env bash
# GPT-2 124M training step (bench/gpu/gpt2_step.py: batch 8 x 1024, bf16
# autocast, AdamW) with an out-of-memory observer attached to PyTorch's
# caching allocator (--oom-observer: the hook python/tpaudit/_oom.py attaches,
# called only when an allocation fails) against the plain step, alternated,
# ROUNDS rounds (default 3) of STEPS steps (default 25); each prints its
# per-step median (steps 6 on), and the figure is the median of the rounds'
# ratios.  Usage: bench/gpu/oom_observer.sh
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
rounds="${ROUNDS:-3}" steps="${STEPS:-25}"
step_ms() { awk '/median_step_ms/{print $2}'; }
plain=() observed=()
for round in $(seq 1 "$rounds"); do
  p=$(python3 "$here/gpt2_step.py" --steps "$steps" 2>/dev/null | step_ms)
  o=$(python3 "$here/gpt2_step.py" --steps "$steps" --oom-observer 2>/dev/null | step_ms)
  echo "round $round: plain ${p:-?} ms, OOM observer attached ${o:-?} ms"
  plain+=("${p:-nan}") observed+=("${o:-nan}")
done
python3 - "${plain[*]}" "${observed[*]}" <<'PY'
import statistics, sys
plain, obs = ([float(v) for v in arg.split()] for arg in sys.argv[1:3])
ratios = [b / a for a, b in zip(plain, obs)]
print(f"gpt2 124M step median of {len(plain)} rounds: plain {statistics.median(plain):.2f} ms, OOM observer attached "
      f"{statistics.median(obs):.2f} ms; median ratio {statistics.median(ratios):.3f}x (target: within 1.01x)")
print("per-round ratios observer/plain: " + " ".join(f"{r:.3f}" for r in ratios))
PY
