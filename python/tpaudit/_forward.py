"""Which modules ran forward, seen without a module hook.

torch.nn.Module.__call__ is replaced by a descriptor: an instance fetching
its __call__ (every `module(x)` does) is remembered in _track.forwarded, and
gets the bound original, so the forward runs exactly as before and no frame
of the probe is on the stack while it does.  Each such eager call is also
told to _track.notify_module_call (the growth watch's iterations without an
optimizer step, _growth.RootCalls).  Fetched from the class it gives
the original function itself, so `torch.nn.Module.__call__` is unchanged for
whoever compares or pickles it.

Nothing of it reaches torch.compile: there is no global hook (which dynamo
warns about, traces, and guards on), the class attribute dynamo reads is the
original, and a module dynamo inlines is remembered when dynamo fetches its
__call__ while tracing.  Code that dynamo traces through the descriptor
itself sees torch.compiler.is_dynamo_compiling() as True and records nothing.

A tool that sets Module.__call__ back to the function it read (FX's symbolic
tracer does, at the end of each trace) takes the descriptor out;
`rearm()` puts it back, and the probe calls it at each optimizer step.
"""
import types

from . import _track


class ModuleCall:
    """The descriptor that stands for Module.__call__."""

    def __init__(self, call, is_compiling, on_error):
        self.call = call
        self.is_compiling = is_compiling
        self.on_error = on_error
        self.enabled = True

    def __get__(self, module, owner=None):
        if module is None:
            return self.call
        if self.enabled:
            try:
                if not self.is_compiling():
                    if id(module) not in _track.forwarded.data:
                        _track.forwarded.put(module, None)
                    _track.notify_module_call(module)
            except Exception as exc:  # never break the user's call
                self.enabled = False
                self.on_error(exc)
        return types.MethodType(self.call, module)


_installed = None  # (Module class, ModuleCall)


def compiling_test(torch):
    """The function that tells whether dynamo is tracing: torch.compiler's
    is_dynamo_compiling (2.4+), else its is_compiling (2.3), else
    torch._utils.is_compiling (2.1, 2.2: dynamo's constant_functions and
    its torch variables fold it to True), else one that says no."""
    compiler = getattr(torch, "compiler", None)
    for owner, name in ((compiler, "is_dynamo_compiling"), (compiler, "is_compiling"),
                        (getattr(torch, "_utils", None), "is_compiling")):
        test = getattr(owner, name, None)
        if callable(test):
            return test
    return lambda: False


def install(torch, on_error):
    """Puts the descriptor on torch.nn.Module (once)."""
    global _installed
    Module = torch.nn.Module
    call = Module.__dict__["__call__"]
    if not isinstance(call, types.FunctionType):
        return
    desc = ModuleCall(call, compiling_test(torch), on_error)
    Module.__call__ = desc
    _installed = (Module, desc)


def rearm():
    """Puts the descriptor back where a tool restored the original function
    (and only there: another tool's own __call__ is left alone)."""
    if _installed is None:
        return
    Module, desc = _installed
    if desc.enabled and Module.__dict__.get("__call__") is desc.call:
        Module.__call__ = desc
