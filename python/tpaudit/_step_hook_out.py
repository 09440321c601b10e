"""Takes the probe's global optimizer step pre-hook out where torch 2.2's
torch.compile strips the step hooks (docs/PROBE.md, "Torch 2.2").

On torch 2.2 every dynamo context built (torch.compile, torch._dynamo.optimize,
torch.export) calls dynamo's TorchPatcher.patch once per process, which sets
each torch.optim class's step back to the function under the hook wrapper:
from then on no step pre-hook of those classes runs.  A step bound before that
(`torch.compile(opt.step)`, or `step = opt.step` in a compiled function)
still runs the wrapper, and there any global step pre-hook makes dynamo 2.2
leave the step's frame unconverted (frames ok one fewer, its graph break not
counted).  So right after patch ran, the probe removes its own global
pre-hook: such a wrapper then runs the empty hook loop it runs without the
probe, and every step from then on is taken as a silent step
(_silent_steps.py), as the stripped classes' steps already were.

patch is found when torch._dynamo.eval_frame is first imported
(_after_import); the probe's function put in its place is code dynamo never
traces (_dynamo_frames.install) and does its own work with dynamo's frame
callback off.  Torch from 2.3 strips no step hook: nothing changes there.
"""
import functools

from . import _after_import
from . import _dynamo_frames

MODULE = "torch._dynamo.eval_frame"
LAST_STRIPPING = (2, 2)  # the last torch release whose TorchPatcher.patch strips the step hooks


def install(release, take_out, on_error):
    """take_out() once TorchPatcher.patch has run (now when it has already
    run), on a torch whose (major, minor) release is LAST_STRIPPING or
    older; an error of the probe's goes to on_error(exc), never to the
    program."""
    if release is None or release > LAST_STRIPPING:
        return
    _after_import.after_import(MODULE, functools.partial(_wrap, take_out, on_error), on_error)


def _wrap(take_out, on_error, module):
    patcher = getattr(module, "TorchPatcher", None)
    held = getattr(patcher, "__dict__", {}).get("patch")
    if not isinstance(held, staticmethod):
        return  # another dynamo: left as it is
    original = held.__func__
    info = getattr(original, "cache_info", None)
    if info is not None and info().currsize:  # patch ran before the probe came
        take_out()
        return
    for code in wrapper_code():
        _dynamo_frames.never_traced(code)
    patcher.patch = staticmethod(_after_patch(original, take_out, on_error))


def _after_patch(original, take_out, on_error):
    """original (TorchPatcher.patch), then take_out() with dynamo's frame
    callback off."""
    @functools.wraps(original)
    def patch():
        done = original()
        prior = _dynamo_frames.callback_set(None)
        try:
            take_out()
        except Exception as exc:  # never reaches the program's torch.compile
            on_error(exc)
        finally:
            _dynamo_frames.callback_set(prior)
        return done
    return patch


def wrapper_code():
    """The code object of the function put in TorchPatcher.patch's place."""
    return [c for c in _after_patch.__code__.co_consts if isinstance(c, type(_after_patch.__code__))]
