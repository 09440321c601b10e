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
                  listeners; owner: the submodule marked last in the
                  forward, else the class of the last forward's root
                  module); then, in the steps whose forwards are marked
                  module by module, as the gradient reaches a marked
                  module's input, that module's backward (and all of it
                  nested inside) is done: what is made from there on is
                  the backward of the module marked just before it in the
                  forward (owner: its dotted name), as forward's bytes
                  after a call are the module called last.  The forward's
                  listener puts a pre-hook on the input's autograd node
                  (the first tensor argument with a grad_fn; not the node
                  hooked last: a block and its first submodule share their
                  input, and the block's mark is the one that holds); the
                  hook holds a name and the marks, no tensor, and goes
                  with the graph.
                  None where dynamo's compiled autograd is on.  A marked
                  module called inside backward (torch's current graph
                  task: a checkpoint recomputing its region) marks the
                  backward of that module;
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
import functools
import itertools
import sys
import weakref

from . import _allocator
from . import _dynamo_frames
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
        self.last_marked = None    # the dotted name of the submodule marked last in this forward
        self.hooked = None         # weakref to the tensor whose autograd node was given a backward mark last
        _dynamo_frames.never_traced(_backward_reached.__code__)

    def mark(self, phase, owner):
        if PART in _parts.off and self.window is not None and self.window.open is not None:
            self.window.close()  # the part went off: the allocator's history is not left on until exit
        _parts.guard(PART, self._record, phase, owner)

    def _record(self, phase, owner):
        if phase != BACKWARD and self.window is not None and self.window.open is not None:
            self.window.end()
        elif phase == BACKWARD and self.window is not None:
            self.window.marked(owner)
        self.last = phase
        live, reserved, peak, device = _allocator.live_and_peak()
        self.rec.phase_mark(_track.coming_step(self.counts), phase, owner, device, live, reserved, peak)

    def module_called(self, module):
        """A module-call listener (_track.module_call_listeners)."""
        self.forward_owner = type(module).__name__
        self.mark(FORWARD, self.forward_owner)
        self.last_marked, self.hooked = None, None
        self.forwards += 1
        if self.forwards <= MODULE_FORWARDS and _track.coming_step(self.counts) <= MODULE_STEPS:
            _parts.guard(PART, self._mark_submodules_of, module)
        elif self.root is not None:
            self.root = None
            _track.marked_modules.clear()  # the twin's test finds none: no listener runs

    def submodule_called(self, module, args=(), kwargs=None):
        """A marked-call listener (_track.marked_call_listeners)."""
        if PART in _parts.off:  # turned off: the twin calls no listener any more
            _track.marked_modules.clear()
            return
        name = _track.marked_modules.get(id(module))
        if name is None:
            return
        if _inside_backward():  # a checkpoint recomputing its region
            self.mark(BACKWARD, name)
            return
        self.mark(FORWARD, name)
        before, self.last_marked = self.last_marked, name
        if before is not None:
            _parts.guard(PART, self._hook_input, before, args, kwargs or {})

    def _hook_input(self, before, args, kwargs):
        """Marks the backward of `before` where the gradient reaches the
        first of args and kwargs that has an autograd node."""
        torch = sys.modules.get("torch")
        if torch is None or _compiled_autograd_on(torch):
            return
        for value in itertools.chain(args, kwargs.values()):
            if not isinstance(value, torch.Tensor):
                continue
            try:
                node = value.grad_fn
            except Exception:  # a tensor subclass that has none to give
                continue
            if node is None:
                continue
            if not self._hooked_last(node) and hasattr(node, "register_prehook"):
                node.register_prehook(functools.partial(_backward_reached, self, before))
                self.hooked = weakref.ref(value)
            return

    def _hooked_last(self, node):
        """Whether node is the one hooked last (a block's input given to its
        first submodule): compared through the tensor hooked last, held
        weakly, as the Python object of a node lives no longer than its use."""
        tensor = self.hooked() if self.hooked is not None else None
        if tensor is None:
            return False
        try:
            return tensor.grad_fn is node
        except Exception:
            return False

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
        self.mark(BACKWARD, self.last_marked or self.forward_owner)
        self.hooked = None

    def step_starts(self, opt):
        self.mark(OPTIMIZER_STEP, type(opt).__name__)

    def zero_grad(self, _opt):
        """Optimizer.zero_grad: the step is over when its optimizer stepped
        (or before any mark); a zero_grad between forward and backward is
        part of the step and marks nothing."""
        if self.last in (None, OPTIMIZER_STEP):
            self.mark(OUTSIDE, None)


def _backward_reached(marks, owner, _grad_outputs):
    """An autograd node's pre-hook (bound to the marks and a name by
    functools.partial, which holds nothing of the graph): the gradient
    reached a marked module's input, so the backward of `owner`, the module
    marked before it, starts.  It marks it with dynamo's frame callback off
    (this function's own frame is one dynamo never traces: PhaseMarks marks
    its code so) and returns None: the gradient is the node's own."""
    callback = _dynamo_frames.callback_set(None)
    try:
        if PART not in _parts.off:
            marks.mark(BACKWARD, owner)
    finally:
        if callback is not None:
            _dynamo_frames.callback_set(callback)
    return None


def _inside_backward():
    """True while the autograd engine runs a backward on this thread (torch's
    current graph task; a checkpoint's recomputation runs inside it)."""
    torch = sys.modules.get("torch")
    task = getattr(getattr(torch, "_C", None), "_current_graph_task_id", None)
    return task is not None and task() != -1


def _compiled_autograd_on(torch):
    """True where dynamo's compiled autograd is asked for (it would trace the
    node's pre-hook into its graph)."""
    config = getattr(getattr(torch, "_dynamo", None), "config", None) if "torch._dynamo" in sys.modules else None
    return bool(getattr(config, "compiled_autograd", False))
