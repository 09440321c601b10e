"""What the probe knows about training frameworks' optimizer wrappers.

A wrapper (Megatron's MixedPrecisionOptimizer, a DeepSpeed ZeRO optimizer,
a ColossalAI-style OptimizerWrapper...) keeps low-precision *working*
tensors (the model's parameters) apart from the fp32 *masters* that its
inner torch optimizer trains.  pairs() yields (label, working, master) for
one wrapper object; the audit records each as a map_entry ref, so the
analyzer judges the working side: a master whose working tensor is a live
model parameter is fine, a working tensor that left the model is stale.

Each framework module holds a table of the classes and attributes it reads
(and the versions they were read from); generic.py covers the rest.  Each
is a part of the probe (_parts.py: framework:<name>): an error in one turns
it off alone; the objects it would have read are then left to the generic
rule (after the error itself, the object that raised it is paired by none).
"""
from .. import _parts
from . import deepspeed, megatron, colossalai, generic

KNOWN = (megatron, deepspeed, colossalai)
GENERIC = "framework:generic"


def _part(framework):
    return "framework:" + framework.__name__.rpartition(".")[2]


def _table_entry(obj, framework):
    """The framework's entry for obj's class (or a base class), else None."""
    for cls in type(obj).__mro__:
        if cls.__module__.startswith(framework.MODULE_PREFIXES):
            entry = framework.CLASSES.get(cls.__name__)
            if entry is not None:
                return entry
    return None


def _leaves(value):
    return value if isinstance(value, (list, tuple)) else [value]


def group_pairs(obj, working_attr, master_attr, is_tensor):
    """Pairs from parallel per-group lists: working[i] is a list of params,
    master[i] a list of the same length (one master each) or one flat tensor
    (a partition serving all of working[i])."""
    working, master = getattr(obj, working_attr, None), getattr(obj, master_attr, None)
    if not isinstance(working, (list, tuple)) or not isinstance(master, (list, tuple)):
        return
    for i, (ws, ms) in enumerate(zip(working, master)):
        ws = _leaves(ws)
        if is_tensor(ms):
            for j, w in enumerate(ws):
                if is_tensor(w):
                    yield "%s[%d][%d]->%s[%d]" % (working_attr, i, j, master_attr, i), w, ms, True
        elif isinstance(ms, (list, tuple)) and len(ms) == len(ws):
            for j, (w, m) in enumerate(zip(ws, ms)):
                if is_tensor(w) and is_tensor(m):
                    yield "%s[%d][%d]->%s[%d][%d]" % (working_attr, i, j, master_attr, i, j), w, m, False


def _children(obj, framework):
    entry = _table_entry(obj, framework)
    out = []
    if entry is not None:
        for attr in entry.get("children", ()):
            out.extend(child for child in _leaves(getattr(obj, attr, None)) if child is not None)
    return out


def children(obj):
    """Objects below obj that a framework table names (e.g. ChainedOptimizer's parts)."""
    out = []
    for framework in KNOWN:
        out.extend(_parts.guard(_part(framework), _children, obj, framework, default=()))
    return out


def _framework_pairs(obj, entry, group_ids, is_tensor):
    out = []
    for working_attr, master_attr in entry.get("groups", ()):
        out.extend(group_pairs(obj, working_attr, master_attr, is_tensor))
    if entry.get("maps"):
        out.extend(generic.tensor_maps(obj, group_ids, is_tensor))
    return out


def _generic_pairs(obj, group_ids, is_tensor, was_param):
    return list(generic.tensor_maps(obj, group_ids, is_tensor)) + \
        list(generic.parallel_lists(obj, group_ids, is_tensor, was_param))


def pairs(obj, group_ids, is_tensor, was_param):
    """[(label, working, master, flat)] for one wrapper object: by its
    framework's table when a framework knows its class, else the generic
    rule; none from a part that is off or fails now."""
    for framework in KNOWN:
        part = _part(framework)
        if not _parts.on(part):
            continue
        try:
            entry = _table_entry(obj, framework)
            if entry is not None:
                return _framework_pairs(obj, entry, group_ids, is_tensor)
        except Exception as exc:
            _parts.fail(part, exc)
            return []
    return _parts.guard(GENERIC, _generic_pairs, obj, group_ids, is_tensor, was_param, default=[])
