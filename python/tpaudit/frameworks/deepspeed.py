"""DeepSpeed ZeRO and bf16 optimizers (deepspeed.runtime).

Read from deepspeed 0.19.8:
- DeepSpeedZeroOptimizer (zero/stage_1_and_2.py, ZeRO-1/2): bit16_groups[i]
  (the model's bf16/fp16 params of group i) <-> single_partition_of_fp32_groups[i]
  (one flat fp32 partition of this rank, the inner optimizer's param).
- BF16_Optimizer (bf16_optimizer.py, ZeRO-0 with bf16): bf16_groups[i] <->
  fp32_groups_flat_partition[i].
- DeepSpeedZeroOptimizer_Stage3 (zero/stage3.py, ZeRO-3): fp16_groups[i]
  <-> fp32_partitioned_groups_flat[i].
The engine (DeepSpeedEngine) is a Module holding `module` and `optimizer`;
the wrapper above it is found by holders.py like any other.  ZeRO-0 with
bf16 on the CPU picks FP16_UnfusedOptimizer (fp16_groups <-> fp32_groups,
read by the generic rule); it steps the inner optimizer once in its
constructor, before any forward (_facts.collect finds the model through the
working tensors' owners then).
"""
MODULE_PREFIXES = ("deepspeed.runtime",)

CLASSES = {
    "DeepSpeedZeroOptimizer": {"groups": (("bit16_groups", "single_partition_of_fp32_groups"),)},
    "BF16_Optimizer": {"groups": (("bf16_groups", "fp32_groups_flat_partition"),)},
    "DeepSpeedZeroOptimizer_Stage3": {"groups": (("fp16_groups", "fp32_partitioned_groups_flat"),)},
}
