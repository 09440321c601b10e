"""Finds, with no help from the program, the objects above a torch optimizer
that hold it: framework wrappers such as Megatron's MegatronOptimizer and
ChainedOptimizer, DeepSpeed's engine and ZeRO optimizers, accelerate's
AcceleratedOptimizer, Lightning's LightningOptimizer and strategies, or a
ColossalAI-style OptimizerWrapper.

Two cheap looks, the results kept as weakrefs only:
- at an audited step, the `self` of each frame above the step hook that
  holds the optimizer (or a holder already found) through an attribute, a
  container in an attribute, or an object in such a container;
- once per optimizer, gc.get_referrers up to LEVELS levels: instances (or
  their __dict__) and plain containers holding it, then what holds those.
"""
import gc
import sys
import types
import weakref

LEVELS = 3          # holder of holder of holder
MAX_FANOUT = 64     # referrers followed per level
MAX_CONTAINER = 64  # elements of one container looked at

_SKIP_TYPES = (types.FrameType, types.ModuleType, types.FunctionType, types.MethodType, type,
               types.CodeType, weakref.ReferenceType)


def _contains(value, targets, depth):
    if id(value) in targets:
        return True
    if isinstance(value, (list, tuple)):
        items = value[:MAX_CONTAINER]
    elif isinstance(value, dict):
        items = list(value.values())[:MAX_CONTAINER]
    else:
        items = None
    if items is not None:
        return any(_contains(v, targets, depth) for v in items)
    if depth > 0 and hasattr(value, "__dict__") and not isinstance(value, _SKIP_TYPES):
        try:
            attrs = vars(value)
        except TypeError:
            return False
        return any(id(v) in targets for v in list(attrs.values())[:4 * MAX_CONTAINER])
    return False


def holds(obj, targets):
    """True when obj reaches an id in targets through its attributes (two hops)."""
    try:
        attrs = vars(obj)
    except TypeError:
        return False
    for v in list(attrs.values()):
        if _contains(v, targets, 1):
            return True
    return False


def from_frames(opt, frame):
    """Holders of opt among the `self`s of the frames from frame outwards."""
    found, targets = [], {id(opt)}
    while frame is not None:
        code = frame.f_code
        if code.co_argcount and code.co_varnames[0] == "self":
            obj = frame.f_locals.get("self")
            if obj is not None and id(obj) not in targets and holds(obj, targets):
                targets.add(id(obj))
                found.append(obj)
        frame = frame.f_back
    return found


def from_referrers(opt, ignore):
    """Holders of opt found through gc.get_referrers, LEVELS levels up."""
    found, seen = [], {id(opt)} | {id(x) for x in ignore}
    level = [opt]
    here = sys._getframe()
    for _ in range(LEVELS):
        refs = gc.get_referrers(*level)
        nxt, dicts = [], []
        for r in refs[:4 * MAX_FANOUT]:
            if id(r) in seen or r is level or r is refs or isinstance(r, _SKIP_TYPES):
                continue
            seen.add(id(r))
            if type(r) is dict:
                dicts.append(r)
            elif isinstance(r, (list, tuple, set)):
                nxt.append(r)
            elif hasattr(r, "__dict__"):
                found.append(r)
                nxt.append(r)
        if dicts:
            owners = gc.get_referrers(*dicts)
            by_dict = {id(d) for d in dicts}
            for o in owners:
                if id(o) in seen or isinstance(o, _SKIP_TYPES) or o is dicts:
                    continue
                d = getattr(o, "__dict__", None) if not isinstance(o, (dict, list, tuple)) else None
                if d is not None and id(d) in by_dict:
                    seen.add(id(o))
                    found.append(o)
                    nxt.append(o)
                elif type(o) is dict or isinstance(o, (list, tuple)):
                    if id(o) not in seen:
                        seen.add(id(o))
                        nxt.append(o)
        del refs
        level = nxt[:MAX_FANOUT]
        if not level:
            break
    del here
    return found
