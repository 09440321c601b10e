"""ColossalAI's optimizer wrappers (colossalai.*).

HybridParallelPlugin (read in colossalai 0.5.0) wraps the user's torch
optimizer, kept as `optim`, at booster.boost, after shardformer sharded the
model's parameters in place:

- fp32: HybridParallelNaiveOptimizer, an OptimizerWrapper; the inner
  optimizer holds the model's own parameters, so nothing is paired.
- fp16/bf16 without ZeRO: HybridParallelAMPOptimizer, a
  MixedPrecisionOptimizer (colossalai.amp.naive_amp), which keeps
  tensor-keyed master_to_working_map and working_to_master_map; the masters
  (fp32 copies, or the param itself when it already is fp32) are the inner
  optimizer's params.  The maps are read by generic.tensor_maps.

Not read: the ZeRO path (HybridParallelZeroOptimizer, LowLevelZeroOptimizer),
whose parameter store keys its maps by id(); its masters fall under the
generic rule 3 (docs/FRAMEWORKS.md).  Checked by tests/frameworks/
test_colossal.py on the CPU and scripts/gpu_colossal.sh on a GPU.
"""
MODULE_PREFIXES = ("colossalai.",)

CLASSES = {
    "MixedPrecisionOptimizer": {"maps": True},
    "OptimizerWrapper": {"maps": True},
}
