"""Each eager Tensor.backward call heard, unseen by dynamo: the twin of
torch.Tensor.backward, built as _forward.py builds Module.__call__'s (torch's
source under torch's file name, function name and line numbers), whose first
test also tells the listeners of _track.backward_listeners:

    if not (_compiling() or _listeners and _hear(self, _off()) or True) or has_torch_function_unary(self):

`_off()` (torch's C set_eval_frame(None)) turns dynamo's frame callback off
before the first frame of the probe exists, and _track.notify_backward puts
it back.  What it is for: a loop compiled whole (one torch.compile(fn) over
forward, backward and step) whose model dynamo traces with no graph break
and which clears its gradients without Optimizer.zero_grad makes no eager
call the probe hears but its `loss.backward()`, which dynamo does not trace
(a graph break: "Unsupported Tensor.backward() call") and runs eagerly;
there the probe reads the optimizers' parameter versions (_silent_steps.py)
and takes a step that ran unseen.  Where dynamo does trace the twin (its
trace_autograd_ops, compiled autograd), `_compiling()` folds to True and the
rest is never traced.
"""
import functools
import inspect

from . import _dynamo_frames
from . import _forward
from . import _track

_installed = None  # (Tensor class, original backward, twin)

# The names the twin's test reads (its globals are this module's, with the
# names torch's body reads copied from torch's module at install).
_compiling = None  # torch's is_dynamo_compiling, set by twin_of
_listeners = _track.backward_listeners
_hear = _track.notify_backward
_off = type(None)  # () -> None, a C call; at install torch's set_eval_frame(None)

_NOTE = "not (_compiling() or _listeners and _hear(self, _off()) or True) or "
TEST = "if has_torch_function_unary(self):"


def install(torch):
    """Puts the twin on torch.Tensor as backward (once)."""
    global _installed, _off
    Tensor = torch.Tensor
    call = Tensor.__dict__.get("backward")
    compiling = _forward.compiling_test(torch)
    if _installed is not None or not inspect.isfunction(call) or compiling is None or compiling() is not False:
        return
    scope = globals()
    twin = _forward.twin_of(call, compiling, TEST, _NOTE, scope)
    if twin is None:
        return
    for name in twin.__code__.co_names:  # torch's globals the body reads (has_torch_function_unary, torch, ...)
        if name not in scope and name in call.__globals__:
            scope[name] = call.__globals__[name]
    if _dynamo_frames.found:
        _off = functools.partial(_dynamo_frames.callback_set, None)
    Tensor.backward = twin
    _installed = (Tensor, call, twin)
