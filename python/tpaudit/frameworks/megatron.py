"""Megatron-core optimizers (megatron.core.optimizer).

Read from megatron-core 0.16.1 (optimizer.py, distrib_optimizer.py) and
checked against the core_v0.19.0 tag and main (0.20.0): the attribute names
below are the same in all of them.

- Float16OptimizerWithFloat16Params: float16_groups[i][j] (bf16/fp16 model
  params) <-> fp32_from_float16_groups[i][j] (fp32 masters in the inner
  optimizer); fp32_from_fp32_groups holds fp32 model params themselves.
- DistributedOptimizer: model_float16_groups[i][j] <->
  shard_fp32_from_float16_groups[i][j] (fp32 shard of this rank),
  model_fp32_groups[i][j] <-> shard_fp32_groups[i][j] (a view of the shard).
- ChainedOptimizer: chained_optimizers, each one of the above.
"""
MODULE_PREFIXES = ("megatron.core.optimizer",)

CLASSES = {
    "Float16OptimizerWithFloat16Params": {"groups": (("float16_groups", "fp32_from_float16_groups"),)},
    "DistributedOptimizer": {"groups": (("model_float16_groups", "shard_fp32_from_float16_groups"),
                                        ("model_fp32_groups", "shard_fp32_groups"))},
    "ChainedOptimizer": {"children": ("chained_optimizers",)},
    "FP32Optimizer": {},
}
