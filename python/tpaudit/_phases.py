"""The parts of each step, marked with the live memory where each starts
(TPAUDIT_PEAK=backward; table phase_mark, docs/schema.md).

Between two audits the probe knows how much memory is live (the step
sample) but not who holds it.  What a step makes and frees before the next
audit, its activations and temporaries, is made by one part of the step:
  forward         a root module (one no module holds) is called eagerly:
                  the module_call_listeners of _track, as the growth
                  watch's own sample point hears it (owner: its class);
                  then, in the first MODULE_STEPS steps (and at most
                  MODULE_FORWARDS root calls: an eval loop has no step),
                  each of its submodules as it is called eagerly
                  (_track.marked_modules, up to MAX_MARKED; owner: its
                  dotted name, `transformer.h.3.attn`): what is made from
                  one module's call to the next is that module's.  Later
                  forwards are marked by their root module alone, so a
                  long run's marks stay a few a step.  No
                  mark is heard as a module returns, so the bytes its
                  caller makes after it (a block's residual add after its
                  MLP, the loss after the last layer) go to the module
                  called last, within the caller that made them;
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
from ._structs import PHASE_FORWARD as FORWARD, PHASE_BACKWARD as BACKWARD  # the parts' names (tpaudit.h)
from ._structs import PHASE_OPTIMIZER_STEP as OPTIMIZER_STEP, PHASE_OUTSIDE as OUTSIDE

PART = "phase_marks"
MAX_MARKED = 4096  # submodules of a root module whose calls are marked; a larger model marks its first ones
MODULE_STEPS = 3  # the steps whose forwards are marked module by module (the optimizer's state is made in step 1)
MODULE_FORWARDS = 32  # and at most this many root calls (gradient accumulation, a loop with no optimizer)


class PhaseMarks:
    """Records a phase_mark row at each part of a step; `step_counts` is the
    hooks' optimizer -> [steps taken, next step due] (a mark's step is the
    step about to run, as a sample's)."""

    def __init__(self, recorder, step_counts, window=None):
        self.rec, self.counts = recorder, step_counts
        self.window = window       # the _peak_moment.PeakWindow a mark after backward ends, or None
        self.forward_owner = None  # the class of the last root module called
        self.last = None           # the phase of the last mark
        self.root = None           # weakref to the root module whose submodules are marked
        self.forwards = 0          # root calls heard

    def mark(self, phase, owner):
        if PART in _parts.off and self.window is not None and self.window.open is not None:
            self.window.close()  # the part went off: the allocator's history is not left on until exit
        _parts.guard(PART, self._record, phase, owner)

    def _record(self, phase, owner):
        if phase != BACKWARD and self.window is not None and self.window.open is not None:
            self.window.end()
        self.last = phase
        live, reserved, peak, device = _allocator.live_and_peak()
        self.rec.phase_mark(_track.coming_step(self.counts), phase, owner, device, live, reserved, peak)

    def module_called(self, module):
        """A module-call listener (_track.module_call_listeners)."""
        self.forward_owner = type(module).__name__
        self.mark(FORWARD, self.forward_owner)
        self.forwards += 1
        if self.forwards <= MODULE_FORWARDS and _track.coming_step(self.counts) <= MODULE_STEPS:
            _parts.guard(PART, self._mark_submodules_of, module)
        elif self.root is not None:
            self.root = None
            _track.marked_modules.clear()  # the twin's test finds none: no listener runs

    def submodule_called(self, module):
        """A marked-call listener (_track.marked_call_listeners)."""
        if PART in _parts.off:  # turned off: the twin calls no listener any more
            _track.marked_modules.clear()
            return
        name = _track.marked_modules.get(id(module))
        if name is not None:
            self.mark(FORWARD, name)

    def _mark_submodules_of(self, root):
        """Makes root's submodules the marked ones, by their dotted names
        (once per root: a new root module replaces them)."""
        if self.root is not None and self.root() is root:
            return
        marked = {}
        model = _track.compiled_from(root) or root  # torch.compile's wrapper: the names eager mode gives
        for name, sub in model.named_modules():
            if sub is not model and len(marked) < MAX_MARKED:  # (named_modules gives each module once)
                marked[id(sub)] = name
        self.root = _track.weakref.ref(root)
        _track.marked_modules.clear()
        _track.marked_modules.update(marked)

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
