"""dynamo's frame evaluation as the probe uses it, found once when torch is
imported (install): two C calls of torch._C._dynamo.eval_frame, so the probe
adds no frame of its own where it uses them.

- `callback_set(callback)` puts a frame callback on (None: off) and returns
  the one that was on (set_eval_frame).  None to None changes nothing, so a
  process where dynamo is off, or another tool's frame evaluator, is left as
  it is.  The step hooks and the module-call listeners turn it off before any
  probe frame runs, and back on after.
- the code that runs inside the program's imports while an import finder of
  the probe waits (_after_import.finder_code) is marked as code dynamo never
  traces: skip_code up to torch 2.6, set_code_exec_strategy(code, SKIP for
  the frame, DEFAULT for what it calls) from 2.7, what torch._dynamo.skip
  does.  dynamo then never calls back for it, so it is no frame it counts.
  `never_traced(code)` marks another such code object (_step_hook_out.py's
  function in TorchPatcher.patch's place).

Without dynamo (torch before 2.0, or no eval_frame module) nothing changes.
"""
import functools

from . import _after_import


def _keep(_callback):
    return None


callback_set = _keep
never_traced = _keep
found = False  # torch's set_eval_frame is callback_set


def install(torch):
    global callback_set, found, never_traced
    frames = getattr(getattr(torch._C, "_dynamo", None), "eval_frame", None)
    set_eval_frame = getattr(frames, "set_eval_frame", None)
    if callable(set_eval_frame):
        callback_set, found = set_eval_frame, True
    never_traced = _skip_code(frames)
    for code in _after_import.finder_code():
        never_traced(code)


def _skip_code(frames):
    old = getattr(frames, "skip_code", None)
    if callable(old):
        return old
    strategy = getattr(frames, "set_code_exec_strategy", None)
    action, kind = getattr(frames, "_FrameAction", None), getattr(frames, "_FrameExecStrategy", None)
    if callable(strategy) and action is not None and kind is not None:
        return functools.partial(_set_strategy, strategy, kind(action.SKIP, action.DEFAULT))
    return _keep


def _set_strategy(strategy, skip, code):
    strategy(code, skip)
