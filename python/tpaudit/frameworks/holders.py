"""Finds, with no help from the program, the objects above a torch optimizer
that hold it: framework wrappers such as Megatron's MegatronOptimizer and
ChainedOptimizer, DeepSpeed's engine and ZeRO optimizers, accelerate's
AcceleratedOptimizer, Lightning's LightningOptimizer and strategies, or a
ColossalAI-style OptimizerWrapper.

Two cheap looks, the results kept as weakrefs only:
- at an audited step, the `self` of each frame above the step hook that
  holds the optimizer (or a holder already found) through an attribute, a
  container in an attribute, or an object in such a container;
- once per optimizer, up to LEVELS levels of gc referrers, one level at a
  time through the probe's own walk (_holders.referrers): instances (or
  their __dict__) and plain containers holding it, then what holds those.
It keeps the holder walk's rule (_holders.py says why): types are tested
with _holders.is_a, never isinstance, and attributes are read through
_holders.instance_dict, never vars() or getattr, so no proxy's or lazy
module's code runs; containers are read through the builtin types' own
methods.
"""
import itertools
import types
import weakref

from .. import _holders

LEVELS = 3          # holder of holder of holder
MAX_FANOUT = 64     # referrers followed per level
MAX_CONTAINER = 64  # elements of one container looked at

_SKIP_TYPES = (types.FrameType, types.ModuleType, types.FunctionType, types.MethodType, type,
               types.CodeType, weakref.ReferenceType)
is_a = _holders.is_a
instance_dict = _holders.instance_dict


def _elements(value):
    """The first MAX_CONTAINER elements of a list or tuple, or values of a
    dict, else None."""
    if is_a(value, list):
        return list(itertools.islice(list.__iter__(value), MAX_CONTAINER))
    if is_a(value, tuple):
        return list(itertools.islice(tuple.__iter__(value), MAX_CONTAINER))
    if is_a(value, dict):
        return list(itertools.islice(dict.values(value), MAX_CONTAINER))
    return None


def _contains(value, targets, depth):
    if id(value) in targets:
        return True
    items = _elements(value)
    if items is not None:
        return any(_contains(v, targets, depth) for v in items)
    if depth > 0 and not is_a(value, _SKIP_TYPES):
        attrs = instance_dict(value)
        if attrs is not None:
            return any(id(v) in targets for v in itertools.islice(dict.values(attrs), 4 * MAX_CONTAINER))
    return False


def holds(obj, targets):
    """True when obj reaches an id in targets through its attributes (two hops)."""
    attrs = instance_dict(obj)
    if attrs is None:
        return False
    for v in list(dict.values(attrs)):
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


def _parents(level, own):
    """The objects that refer to one of level (_holders.referrers: frames,
    level and the ids in own, the caller's lists, left out)."""
    return [parent for parent, _kids in _holders.referrers(level, {id(level)} | own)]


def from_referrers(opt, ignore):
    """Holders of opt found through gc referrers, LEVELS levels up (ignore:
    holders known already, not found again)."""
    found, seen = [], {id(opt)} | {id(x) for x in ignore}
    own = {id(found), id(ignore)}
    level = [opt]
    for _ in range(LEVELS):
        nxt, dicts = [], []
        for r in _parents(level, own)[:4 * MAX_FANOUT]:
            if id(r) in seen or is_a(r, _SKIP_TYPES):
                continue
            seen.add(id(r))
            if type(r) is dict:
                dicts.append(r)
            elif is_a(r, (list, tuple, set)):
                nxt.append(r)
            elif instance_dict(r) is not None:
                found.append(r)
                nxt.append(r)
        if dicts:
            by_dict = {id(d) for d in dicts}
            for o in _parents(dicts, own):
                if id(o) in seen or is_a(o, _SKIP_TYPES):
                    continue
                d = instance_dict(o) if not is_a(o, (dict, list, tuple)) else None
                if d is not None and id(d) in by_dict:
                    seen.add(id(o))
                    found.append(o)
                    nxt.append(o)
                elif type(o) is dict or is_a(o, (list, tuple)):
                    seen.add(id(o))
                    nxt.append(o)
        level = nxt[:MAX_FANOUT]
        if not level:
            break
    return found
