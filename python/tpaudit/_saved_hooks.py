"""A saved tensor of an autograd node read without running the program's
saved-tensor hooks (torch.autograd.graph.saved_tensors_hooks: the
non-reentrant torch.utils.checkpoint, which HF's
gradient_checkpointing_enable uses by default, save_on_cpu).  Unpacking a
hooked one runs its unpack hook: a checkpoint's recomputes its region's
forward and lets each saved tensor be unpacked once per backward, so a
probe that unpacked it inside backward would make the program's own
backward fail.  Read instead from the hook's state: a checkpoint's tensor
is the one its region's recomputation made for it, waiting for the node's
backward (the recomputation runs in backward, at the first unpack of the
region), else nothing (before backward the region keeps only its inputs,
which the checkpoint's own node saved without hooks); another hook's
packed value is not read.  PyTorch without SavedTensor.unpack_hook (2.6
and before; 2.11 has it) cannot tell a hooked saved tensor from another:
there, while a non-reentrant checkpoint's state lives (an object of
torch.utils.checkpoint's _CheckpointFrame among the audit's gc objects:
note_live), no saved tensor is read at all (their bytes stay in the
device's unattributed remainder); otherwise the node's fields are read as
before.  The reentrant checkpoint saves no hooked tensor.
Docs: PROBE.md, "Activation checkpointing".
"""
import itertools
import operator
import sys

_ABSENT = object()


class Blind(Exception):
    """A saved field left unread: this PyTorch cannot tell whether a checkpoint's hook packed it."""


class _Audit:
    blind = True  # until note_live has looked: unread rather than risk the program's backward


_audit = _Audit()


def note_live(torch, objs):
    """Called by each audit with its gc objects before it reads a saved
    field: on a PyTorch that cannot tell a hooked saved tensor, whether a
    non-reentrant checkpoint's hooks may be live (a _CheckpointFrame: its
    unpack hook's closure keeps it as long as one saved tensor it packed)."""
    if hasattr(torch._C._autograd.SavedTensor, "unpack_hook"):
        _audit.blind = False
        return
    frame = getattr(sys.modules.get("torch.utils.checkpoint"), "_CheckpointFrame", None)
    _audit.blind = frame is not None and any(map(operator.is_, map(type, objs), itertools.repeat(frame)))


def _recomputed(raw):
    """The tensor a checkpoint's recomputation made for hooked saved tensor
    `raw` and its node's backward has not taken yet, else None."""
    hook, holder = raw.unpack_hook, raw.data
    handles = getattr(type(holder), "__name__", "") == "_Holder" and getattr(holder, "handles", None)
    if type(handles) is not dict:
        return None
    frame = None
    for cell in getattr(hook, "__closure__", None) or ():
        try:
            value = cell.cell_contents
        except ValueError:  # an empty cell
            continue
        if type(getattr(value, "recomputed", None)).__name__ == "defaultdict":
            frame = value
    if frame is None:
        return None
    for gid, handle in list(handles.items()):
        made = frame.recomputed.get(gid) if handle is not None else None  # .get: adds no key
        tensor = made.get(handle) if made is not None else None
        if tensor is not None:
            return tensor
    return None


def read(node, name):
    """node's saved field `name` ('_saved_self', 'saved_tensors'): as the
    attribute gives it where no hook packed it, else what the hooks' state
    holds (None for a field of one tensor, the tuple without it for a
    tuple).  Raises as the attribute does (freed after backward), or Blind
    (a PyTorch that cannot tell, while a checkpoint lives)."""
    try:
        raw = getattr(node, "_raw" + name, _ABSENT)
    except Exception:
        raw = _ABSENT
    many = type(raw) in (tuple, list)
    raws = raw if many else (raw,)
    hooks = [None if r is None else getattr(r, "unpack_hook", _ABSENT) for r in raws]
    if raw is _ABSENT or _ABSENT in hooks:  # a PyTorch that cannot tell
        if _audit.blind:
            raise Blind(name)
        return getattr(node, name)  # no checkpoint lives: the attribute, as before
    if all(h is None for h in hooks):
        return getattr(node, name)  # no hook: the attribute
    values = [None if r is None else r.data if h is None else _recomputed(r) for r, h in zip(raws, hooks)]
    return tuple(v for v in values if v is not None) if many else values[0]
