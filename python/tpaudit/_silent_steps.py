"""Optimizer steps that ran without the probe's step pre-hook, noticed at the
next eager call of a root module (docs/PROBE.md, "Modules that ran forward").

A compiled optimizer step (`torch.compile(opt.step)`) on torch 2.6+ runs
dynamo's cached code, where the pre-hook folds away; torch 2.2 strips the
hook wrapper once torch.compile is called.  Every step still bumps the
`_version` of the parameters it updates: a counter on the tensor, read on
the CPU with no device sync.  At each eager root-module call (a listener of
_track.module_call_listeners, called outside dynamo's tracing) the probe
reads a few of each optimizer's parameters' versions; when they moved since
the last call and the optimizer's pre-hook did not run in between, the
optimizer stepped unseen, and the probe takes that step as the hook would
(its count, growth sample and audit): after the update, before the next
forward.  A step whose pre-hook ran (eager) only sets the versions to be
read again at the next call, so it is never taken twice.
"""
import sys

from . import _calls
from . import _track

GROUPS_READ = 2  # param groups read per optimizer: the first and last parameter of each


def versions(opt):
    """The _version counters of the first and last parameter of the first
    GROUPS_READ param groups of opt."""
    read = []
    for group in opt.param_groups[:GROUPS_READ]:
        params = group["params"]
        if params:
            read.append(params[0]._version)
            read.append(params[-1]._version)
    return tuple(read)


class SilentSteps:
    """The listener; on_step(opt, caller frame) takes a step of opt."""

    def __init__(self, on_step):
        self.on_step = on_step
        self.read = _track.WeakIdMap()  # optimizer -> [its versions at the last call, None: read anew]

    def hooked(self, opt):
        """opt's step pre-hook runs: its update is no silent step."""
        entry = self.read.get(opt)
        if entry is not None:
            entry[0] = None

    def __call__(self, module):
        for opt, _ in _track.optimizers.live():
            entry = self.read.get(opt)
            if entry is None:
                self.read.put(opt, [versions(opt)])
                continue
            before = entry[0]
            entry[0] = versions(opt)
            if before is not None and entry[0] != before:
                self.on_step(opt, user_caller(sys._getframe(1)))

def user_caller(frame):
    """The first frame outwards from frame that is not the probe's (the code
    that called the module)."""
    while frame is not None and _calls.probe_frame(frame):
        frame = frame.f_back
    return frame
