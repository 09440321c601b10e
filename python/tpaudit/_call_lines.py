"""Creation lines of a compiled run on the CPU (_growth.CreationRecorder's,
once torch.compile has traced a frame): a TorchDispatchMode, the eager
recorder, would change what dynamo traces, so nothing runs inside the
program's ops.  Instead:
- the storages made in the recorded step are those of the live tensors at
  its end that were not live at its start (the tensors gc tracks, read at
  both ends; a weak reference to each storage at the start tells a storage
  freed since, whose address a new one may have taken);
- each gets the user's stack of the root-module call made in that step,
  heard eagerly, before the compiled graph runs (a listener of
  _track.module_call_listeners, which the twin of Module.__call__ calls
  outside dynamo's tracing; a recording started inside such a call, at a
  step taken there (_silent_steps.py), counts that call too): the line that
  called the compiled model, the line eager mode names for what the model's
  forward made.  A step whose
  root calls came from more than one stack, or none, gives no line (which
  call made what is not known).
A FakeTensor (dynamo's example values) is never read.
"""
import sys

from . import _ledger
from . import _stacks
from . import _track


def live_storages(torch, storage_alive):
    """{data pointer: alive test of its storage} of the live tensors gc
    tracks (the ledger's scan: a type test only, no code of the program runs)."""
    found = {}
    tensors = _ledger.live_tensors(torch)
    for t in tensors:
        if _track.is_fake(t):
            continue
        try:
            ptr = t.untyped_storage().data_ptr()
        except Exception:  # no storage of its own (a wrapper subclass, sparse, meta)
            continue
        if ptr and ptr not in found:
            found[ptr] = storage_alive(t)
    tensors.clear()
    return found


def module_call_in_progress(frame):
    """The frame of _track.notify_module_call on the stack from frame
    outwards (the recording starts inside a module call's listener), or None."""
    notify = _track.notify_module_call.__code__
    while frame is not None and frame.f_code is not notify:
        frame = frame.f_back
    return frame


class CallLineRecorder:
    """Records one step: start at construction, stop() gives {data pointer:
    (sequence, stack text, alive test)} as the eager recorder does."""

    def __init__(self, torch, storage_alive):
        self.torch = torch
        self.storage_alive = storage_alive
        self.before = live_storages(torch, storage_alive)
        self.stacks = set()
        calling = module_call_in_progress(sys._getframe(1))
        if calling is not None:  # started at a root call (a step taken there): its forward is in the step
            self.stacks.add(_stacks.user_stack(calling))
        _track.module_call_listeners.append(self.heard)

    def heard(self, module):
        self.stacks.add(_stacks.user_stack(sys._getframe(1)))

    def stop(self):
        try:
            _track.module_call_listeners.remove(self.heard)
        except ValueError:
            pass
        before, self.before = self.before, {}
        stacks, self.stacks = self.stacks, set()
        if len(stacks) != 1 or not next(iter(stacks)):
            return {}
        (stack,) = stacks
        made = {}
        for ptr, alive in live_storages(self.torch, self.storage_alive).items():
            if ptr not in before or before[ptr] is not None and before[ptr]() is None:
                made[ptr] = (len(made) + 1, stack, alive)
        return made
