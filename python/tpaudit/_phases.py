"""The parts of each step, marked with the live memory where each starts
(TPAUDIT_PEAK=backward; table phase_mark, docs/schema.md).

Between two audits the probe knows how much memory is live (the step
sample) but not who holds it.  What a step makes and frees before the next
audit, its activations and temporaries, is made by one part of the step:
  forward         a root module (one no module holds) is called eagerly:
                  the module_call_listeners of _track, as the growth
                  watch's own sample point hears it (owner: its class);
  backward        an eager Tensor.backward starts (the backward twin's
                  listeners; owner: the class of the last forward's module);
  optimizer_step  an optimizer's step pre-hook runs (owner: its class);
  outside         Optimizer.zero_grad is called (the probe's twin of it,
                  _silent_steps.listen_at_zero_grad; until the next forward).
Each mark reads the allocators' counters (_allocator.live_and_peak: on a
GPU the live, reserved and peak allocated bytes of one stats read, no
device sync, nothing allocated) and records one row; the analyzer gives the
live bytes that grew after a mark, beyond what the last audit attributed,
to that mark's part and owner (analyzer/owner_timeline.c), so the memory
viewer's export and the HTML owner timeline name them.  Every listener runs
eagerly with dynamo's frame callback off, as the other listeners do, or
(zero_grad) in a function dynamo skips, so a compiled program traces none
of it.  No step post-hook: torch runs the global ones inside the optimizer's
step, which dynamo traces where a compiled function steps (one converted
frame less on torch 2.6 and 2.11, test_compile.py).
"""
from . import _allocator
from . import _parts

PART = "phase_marks"
FORWARD, BACKWARD, OPTIMIZER_STEP, OUTSIDE = "forward", "backward", "optimizer_step", "outside"


class PhaseMarks:
    """Records a phase_mark row at each part of a step; `step_counts` is the
    hooks' optimizer -> [steps taken, next step due] (a mark's step is the
    step about to run, as a sample's)."""

    def __init__(self, recorder, step_counts):
        self.rec, self.counts = recorder, step_counts
        self.forward_owner = None  # the class of the last root module called

    def _step(self):
        return 1 + max((entry[0] for entry in self.counts.values()), default=0)

    def mark(self, phase, owner):
        _parts.guard(PART, self._record, phase, owner)

    def _record(self, phase, owner):
        live, reserved, peak, device = _allocator.live_and_peak()
        self.rec.phase_mark(self._step(), phase, owner, device, live, reserved, peak)

    def module_called(self, module):
        """A module-call listener (_track.module_call_listeners)."""
        self.forward_owner = type(module).__name__
        self.mark(FORWARD, self.forward_owner)

    def backward_started(self, _tensor):
        """A backward listener (_track.backward_listeners)."""
        self.mark(BACKWARD, self.forward_owner)

    def step_starts(self, opt):
        self.mark(OPTIMIZER_STEP, type(opt).__name__)

    def zero_grad(self, _opt):
        self.mark(OUTSIDE, None)
