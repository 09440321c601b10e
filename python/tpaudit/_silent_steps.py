"""Optimizer steps that ran without the probe's step pre-hook, noticed at the
next eager call of a root module (docs/PROBE.md, "Modules that ran forward").

A compiled optimizer step (`torch.compile(opt.step)`) on torch 2.6+ runs
dynamo's cached code, where the pre-hook folds away; torch 2.2 strips the
hook wrapper once torch.compile is called (and the probe then takes its
pre-hook out: _step_hook_out.py).  Every step still bumps the `_version` of
the parameters it updates: a counter on the tensor, read on the CPU with no
device sync.  On torch 2.2 a step compiled by inductor bumps none, so once
the hook is out the probe also reads the step count the optimizer keeps in
its state (`state["step"]`, a CPU tensor in torch.optim's Adam family
unless capturable or fused): a compiled step of an optimizer with no such
count there (SGD) goes unseen on 2.2.  At each eager root-module call (a listener of
_track.module_call_listeners, called outside dynamo's tracing) the probe
reads a few of each optimizer's parameters' versions; when they moved since
the last call and the optimizer's pre-hook did not run in between, the
optimizer stepped unseen, and the probe takes that step as the hook would
(its count, growth sample and audit): after the update, before the next
forward.  A step whose pre-hook ran (eager) only sets the versions to be
read again at the next call, so it is never taken twice.

The same reading is done at each Optimizer.zero_grad, torch's own function
run with dynamo off (`torch._disable_dynamo`, in 2.2, 2.6, 2.11): the probe
puts its own function under the same wrapper, so a zero_grad inside a
compiled function is the same skipped call to dynamo (same qualname, file
and graph break), and the probe's frames run with dynamo's callback off.
There a step is taken in a loop that makes no eager module call
(`torch.compile(model.forward)`, a compiled function over forward,
backward and step), right after the update, before the gradients go.
"""
import functools
import sys

from . import _calls
from . import _track

GROUPS_READ = 2  # param groups read per optimizer: the first and last parameter of each


def versions(opt, counts=False):
    """The _version counters of the first and last parameter of the first
    GROUPS_READ param groups of opt; counts: and the step count the
    optimizer keeps for each group's first parameter (state "step", a
    number or a one-element CPU tensor; a device tensor is not read)."""
    read = []
    for group in opt.param_groups[:GROUPS_READ]:
        params = group["params"]
        if params:
            read.append(params[0]._version)
            read.append(params[-1]._version)
            if counts:
                read.append(step_count(opt.state.get(params[0])))
    return tuple(read)


def step_count(state):
    """state["step"] of a parameter's optimizer state, read on the CPU, or None."""
    step = state.get("step") if isinstance(state, dict) else None
    if isinstance(step, (int, float)):
        return step
    if getattr(step, "is_cpu", False) and step.numel() == 1:
        return step.item()
    return None


class SilentSteps:
    """The listener; on_step(opt, caller frame) takes a step of opt."""

    def __init__(self, on_step):
        self.on_step = on_step
        self.read = _track.WeakIdMap()  # optimizer -> [its versions at the last call, None: read anew]
        # torch 2.2, once the step hook is out (_step_hook_out.py): its inductor
        # updates a compiled step's parameters in place with no _version bump,
        # so the optimizer's own step counts are read too
        self.counts = False

    def hooked(self, opt):
        """opt's step pre-hook runs: its update is no silent step."""
        entry = self.read.get(opt)
        if entry is not None:
            entry[0] = None

    def __call__(self, module):
        self.check(sys._getframe(1))

    def check(self, frame):
        """Takes the steps of each optimizer whose versions moved since the
        last reading without its pre-hook; frame: the caller's."""
        for opt, _ in _track.optimizers.live():
            entry = self.read.get(opt)
            if entry is None:
                self.read.put(opt, [versions(opt, self.counts)])
                continue
            before = entry[0]
            entry[0] = versions(opt, self.counts)
            if before is not None and entry[0] != before:
                self.on_step(opt, _calls.outwards(frame))


def listen_at_zero_grad(torch, silent, also=None):
    """Has silent (a SilentSteps) read the versions at each
    Optimizer.zero_grad, and `also` (when given) hear the optimizer there
    (the phase marks, _phases.py), where torch's zero_grad is its function
    under torch._disable_dynamo (the same wrapper goes on the probe's, so
    dynamo skips the call as it skips torch's); elsewhere nothing changes."""
    Optimizer = torch.optim.Optimizer
    zero_grad = Optimizer.__dict__.get("zero_grad")
    disabled = getattr(torch, "_disable_dynamo", None)
    raw = getattr(zero_grad, "__wrapped__", None)
    if disabled is None or raw is None or getattr(zero_grad, "__code__", None) is not disabled(len).__code__:
        return

    wrapper = zero_grad.__code__

    @functools.wraps(raw)
    def heard(self, *args, **kwargs):
        try:  # the caller: the frame that called the wrapper (past dynamo's disabling frames)
            silent.check(outside(sys._getframe(1), wrapper))
            if also is not None:
                also(self)
        except Exception:
            pass  # never reaches the program's call
        return raw(self, *args, **kwargs)
    Optimizer.zero_grad = disabled(heard)


def outside(frame, code):
    """The frame that called the innermost frame of code from frame
    outwards, or frame when there is none."""
    found = frame
    while found is not None and found.f_code is not code:
        found = found.f_back
    return found.f_back if found is not None else frame
