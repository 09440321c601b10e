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
  outside         Optimizer.zero_grad is called after the optimizer stepped
                  (the probe's twin of it, _silent_steps.listen_at_zero_grad;
                  until the next forward; one called between forward and
                  backward is part of the step and marks nothing).
Each mark reads the allocators' counters (_allocator.live_and_peak: on a
GPU the live, reserved and peak allocated bytes of one stats read, no
device sync, nothing allocated) and records one row; the analyzer gives the
live bytes that grew after a mark, beyond what the last audit attributed,
to that mark's part and owner (analyzer/step_phases.c), so the memory
viewer's export and the HTML owner timeline name them.  Every listener runs
eagerly with dynamo's frame callback off, as the other listeners do, or
(zero_grad) in a function dynamo skips, so a compiled program traces none
of it.  No step post-hook: torch runs the global ones inside the optimizer's
step, which dynamo traces where a compiled function steps (one converted
frame less on torch 2.6 and 2.11, test_compile.py).
"""
from . import _allocator
from . import _parts
from . import _track

PART = "phase_marks"
FORWARD, BACKWARD, OPTIMIZER_STEP, OUTSIDE = "forward", "backward", "optimizer_step", "outside"


class PhaseMarks:
    """Records a phase_mark row at each part of a step; `step_counts` is the
    hooks' optimizer -> [steps taken, next step due] (a mark's step is the
    step about to run, as a sample's)."""

    def __init__(self, recorder, step_counts):
        self.rec, self.counts = recorder, step_counts
        self.forward_owner = None  # the class of the last root module called
        self.last = None           # the phase of the last mark

    def mark(self, phase, owner):
        _parts.guard(PART, self._record, phase, owner)

    def _record(self, phase, owner):
        self.last = phase
        live, reserved, peak, device = _allocator.live_and_peak()
        self.rec.phase_mark(_track.coming_step(self.counts), phase, owner, device, live, reserved, peak)

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
        """Optimizer.zero_grad: the step is over when its optimizer stepped
        (or before any mark); a zero_grad between forward and backward is
        part of the step and marks nothing."""
        if self.last in (None, OPTIMIZER_STEP):
            self.mark(OUTSIDE, None)
