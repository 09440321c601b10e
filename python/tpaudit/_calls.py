"""Iterations of a loop that takes no optimizer step (an eval or inference
loop, preprocessing through modules): the growth watch's sample point where
there is no optimizer step to sample at (docs/ANALYZER.md, "Loops without an
optimizer step", says why this point).

The forward mechanism tells every eager module call to
_track.notify_module_call, outside dynamo's tracing.  The *marker* is the
first root module (one no module holds) called.  An iteration begins at
each call of it that the user's own code made; where only a library calls
it (torch or an installed package: `generate`'s per-token calls of the
model, a pipeline), at each call made from another *library call* of the
user's: one whose user frame (the innermost frame outside torch, the
packages and the probe) is another frame, at another instruction, or holds
other values in its variables (or a list, dict or set of another length)
than at the last such call.  While a library call runs, its
user frame waits in it, so its variables cannot change: the tokens of one
`generate` are one call, and a loop of `generate` calls, whose loop
variable or output name is rebound between calls, is one call each.  Once
the user's code calls the marker itself, its calls alone count.  At the
marker's n-th counted call n - 1 iterations are done, and the watch
samples step n - 1; at exit all n are (final_step).  Any other module call
costs one id comparison.

Once an optimizer steps, its step pre-hook is the sample point and the
calls only count: a loop that calls the marker more than max(EVAL_AFTER,
twice the most calls seen between two optimizer steps) times since the
last optimizer step (an eval loop after training) becomes a run of calls
again, its count from 1.
"""
import itertools
import sys
import weakref

from . import _collector
from . import _forward
from . import _stacks
from . import _track
from ._unmeasured import own_code

EVAL_AFTER = 8
_SIZED = frozenset((list, dict, set))
_LIBRARY_PARTS = (_stacks.TORCH_PART, _stacks.PACKAGES_PART)


def probe_frame(frame):
    """Whether frame is the probe's: a file of the probe, or the twin of
    Module.__call__ (_forward.py), which carries torch's file name."""
    return own_code(frame.f_code.co_filename) or _forward.is_twin(frame.f_code)


def _library_frame(frame):
    return any(part in frame.f_code.co_filename for part in _LIBRARY_PARTS)


def _probe_or_library_frame(frame):
    return probe_frame(frame) or _library_frame(frame)


def outwards(frame, passed=probe_frame):
    """The first frame from frame outwards that passed(frame) is false for
    (by default the first that is not the probe's: the code that called
    it), or None."""
    while frame is not None and passed(frame):
        frame = frame.f_back
    return frame


def _user_caller(frame):
    """Whether the first frame outside the probe, from frame outwards, is the
    user's (not torch's or an installed package's)."""
    frame = outwards(frame)
    return frame is not None and not _library_frame(frame)


def library_call(frame):
    """What tells the library call that frame (a library's, called by the
    user's code) is part of from the next one: the innermost user frame
    outwards from frame and the ids of the values of its variables, or None
    when no user frame is on the stack (a thread a library started).  Reads
    only that frame's variables; the snapshot of a function's locals that the
    read leaves is emptied (_forward.forget), so no value is kept alive."""
    frame = outwards(frame, _probe_or_library_frame)
    if frame is None:
        return None
    local = frame.f_locals
    values = list(local.values())
    _forward.forget(frame, local)
    # a list or dict that grew (outs.append(...) with nothing rebound) is another call too;
    # map and compress keep the per-token cost in C (bench/probe/generate_calls.py)
    sized = itertools.compress(values, map(_SIZED.__contains__, map(type, values)))
    seen = (id(frame), frame.f_lasti, tuple(map(id, values)), tuple(map(len, sized)))
    values.clear()
    return seen


class RootCalls:
    """The listener of module calls (one per probe).  on_iteration(step) is
    called when iteration `step` is done; on_restart() when the calls become
    the sample point again after optimizer steps; on_error(exc) after an
    error in it (the listener is then off: the growth watch says so)."""

    def __init__(self, on_iteration, on_restart, on_error):
        self.on_iteration = on_iteration
        self.on_restart = on_restart
        self.on_error = on_error
        self.off = False
        self.reset()

    def reset(self):
        """No marker and no calls counted (the pytest plugin's next test)."""
        self._mark(None)
        self.ref = None        # weakref to it; its death lets the next root be chosen
        self.calls = 0         # calls of the marker since the count began
        self.since_step = 0    # calls since the last optimizer step
        self.most_between = 0  # the most calls seen between two optimizer steps
        self.stepping = False  # an optimizer step is the sample point
        self.users = False     # the user's code called the marker: only such calls count
        self.last_call = None  # library_call() of the last counted call a library made

    def __call__(self, module):
        if id(module) != self.marker and self.marker is not None:
            return
        if self.off:
            return
        try:
            with _collector.held():
                self._call(module)
        except Exception as exc:
            self.off = True
            self.on_error(exc)

    def _call(self, module):
        if self.marker is None:
            self._choose(module)
            return
        if not self._counts(sys._getframe(1)):
            return
        if self.stepping:
            self.since_step += 1
            if self.since_step <= max(EVAL_AFTER, 2 * self.most_between):
                return
            self.stepping, self.calls = False, 0
            self.on_restart()
        self.calls += 1
        if self.calls > 1:
            self.on_iteration(self.calls - 1)

    def _counts(self, caller):
        """Whether this call of the marker (made from the frame caller) begins
        an iteration: any call the user's code made; a library's only until
        the user's code calls the marker, and only from another library call."""
        if _user_caller(caller):
            self.users = True
            return True
        if self.users:
            return False
        call = library_call(caller)
        if call is None or call == self.last_call:
            return False
        self.last_call = call
        return True

    def _choose(self, module):
        if _track.parents.get(module) is not None:
            return
        self.users = False
        self.last_call = None
        if not self._counts(sys._getframe(1)):
            return

        def gone(_ref, self=self):
            self._mark(None)
        if not self.stepping and self.calls > 1:
            self.on_restart()  # a loop over another model: a count of its own
        self._mark(module, weakref.ref(module, gone))
        self.calls = 0 if self.stepping else 1

    def _mark(self, module, ref=None):
        """Makes module (None: none yet) the marker.  Once there is one, the
        twin of Module.__call__ calls the listeners for it alone
        (_track.module_calls_wanted), so no other module's eager call runs
        Python code of the probe: in a compiled program's resumed frames,
        dynamo would convert that code's frames and count them."""
        self.marker, self.ref = (None, None) if module is None else (id(module), ref)
        _track.module_calls_wanted.clear()
        if module is not None:
            _track.module_calls_wanted.add(id(module))

    def optimizer_step(self):
        """An optimizer is about to step: True when the calls were the sample
        point until now (the watch then starts again, counting steps)."""
        sampled = not self.stepping and self.calls > 1
        self.most_between = max(self.most_between, self.since_step)
        self.since_step, self.stepping = 0, True
        return sampled

    def final_step(self):
        """The iterations done at exit when the calls are the sample point, else None."""
        return self.calls if not self.stepping and self.calls > 1 else None
