"""ColossalAI-style mixed-precision wrappers (colossalai.*).

ColossalAI's mixed-precision optimizers (colossalai.amp.naive_amp.
mixed_precision_optimizer.MixedPrecisionOptimizer, an OptimizerWrapper over
`optim`) keep tensor-keyed maps, master_to_working_map and
working_to_master_map; the masters are the inner optimizer's params.  The
maps are read by generic.tensor_maps, which also covers any other wrapper
that keeps such a dict.  ColossalAI is not installed here; the names come
from its public sources (MixedPrecisionOptimizer and its subclasses).
"""
MODULE_PREFIXES = ("colossalai.",)

CLASSES = {
    "MixedPrecisionOptimizer": {"maps": True},
    "OptimizerWrapper": {"maps": True},
}
