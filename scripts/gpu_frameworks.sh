#!/usr/bin/env bash
# Frameworks part of scripts/gpu_all.sh: Megatron-core (plain and
# distributed optimizer), DeepSpeed ZeRO 0 (bf16)/1/2/3 with a client AdamW,
# Lightning bf16-mixed and accelerate bf16 on one GPU, each a correct run and
# a seeded stale run (a module replaced after the framework built its
# optimizer), audited with `tpaudit run` and judged with `tpaudit report
# --format json` and `tpaudit gate`. Wheels the machine lacks (megatron-core,
# deepspeed and its dependencies) come from .carry/whl. Writes
# $OUT/frameworks.md (the table) and one log per run under $OUT/frameworks/.
set -uo pipefail
build="${TPAUDIT_GPU_BUILD:?}"
tpaudit="$build/bin/tpaudit"
out="${OUT:?}/frameworks"
mkdir -p "$out"
if ls .carry/whl/*.whl > /dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --target /tmp/site .carry/whl/*.whl > "$out/pip.log" 2>&1
  export PYTHONPATH="/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
fi
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false PYTHONWARNINGS=ignore
versions=$(python3 -c "
import importlib.metadata as m
for p in ('torch','megatron-core','deepspeed','lightning','accelerate'):
    try: print(p, m.version(p), end='; ')
    except Exception: print(p, 'absent', end='; ')")
table="$OUT/frameworks.md"
{ echo "frameworks on $(nvidia-smi -L 2>/dev/null | head -1), $(date -u +%F): $versions"
  echo; echo "| run | findings | stale tensors (name, retained bytes -> live successor) | gate |"
  echo "|---|---|---|---|"; } > "$table"
torchrun1=(python3 -m torch.distributed.run --standalone --nproc_per_node 1)
row() {  # label, command...
  local label=$1; shift
  local dir="$out/$label"
  rm -rf "$dir"
  timeout 300 "$tpaudit" run -o "$dir" -- "$@" > "$dir.log" 2>&1
  local run_rc=$?
  "$tpaudit" gate "$dir" > "$dir.gate" 2>&1
  local gate_rc=$?
  "$tpaudit" report --format json "$dir" 2> /dev/null |
    python3 tests/gpu/frameworks/verdict.py "$label (exit $run_rc)" "$gate_rc" | tee -a "$table"
}
for seed in "" --seed; do
  tag=${seed:+-seeded}
  row "megatron-plain$tag" "${torchrun1[@]}" tests/gpu/frameworks/megatron_gpt.py plain $seed
  row "megatron-distopt$tag" "${torchrun1[@]}" tests/gpu/frameworks/megatron_gpt.py dist $seed
  for stage in 0 1 2 3; do
    [ "$stage" = 3 ] && [ -n "$seed" ] && continue  # a plain module swapped in under ZeRO-3 fails in DeepSpeed
    row "deepspeed-zero$stage$tag" "${torchrun1[@]}" tests/frameworks/scenarios/deepspeed_zero.py $stage $seed
  done
  row "lightning-bf16$tag" python3 tests/gpu/frameworks/mixed_bf16.py lightning $seed
  row "accelerate-bf16$tag" python3 tests/gpu/frameworks/mixed_bf16.py accelerate $seed
done
cat "$table"
