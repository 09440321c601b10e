"""Which modules ran forward, seen without a module hook and unseen by dynamo.

torch.nn.Module.__call__ (torch's `_wrapped_call_impl`) is replaced by its
twin: the same source, compiled under torch's own file name, function name
and line numbers, whose first test also notes the module:

    if not (_compiling() or _note(_id(self), _ref(self)) or _listeners and _notify(self, _off()) or True) or <torch's test>:

`_note` is a dict's __setitem__ (id -> weakref), `_id` and `_ref` are
builtins: noting a module runs no Python frame, and the `or True` makes the
test torch's own.  So:
- no frame of the probe is ever on the stack while a forward runs: a
  traceback through a module call is line for line the one without the
  probe (its frames are torch's file, line and text);
- dynamo, tracing a module call, sees a function of torch's file that it
  inlines as it does the original: `_compiling()` (torch.compiler's
  is_dynamo_compiling) folds to True there, so the rest of the probe's
  test is never traced (no guard on a module, no graph break, no
  recompile); a frame of the twin that dynamo compiles (an eager module call
  after a graph break) is compiled the same way;
- where a listener hears the call, `_off()` (torch's C set_eval_frame(None),
  called before the listener's first frame exists) turns dynamo's frame
  callback off, and notify_module_call puts it back: an eager module call
  inside a compiled function's frame (a model called where dynamo fell back
  to running the frame, its callback on) has no frame of the probe
  converted by dynamo;
- calls that only a compiled graph makes are not noted: the probe finds
  those models at its audits in the locals of the calling frames
  (`from_frames`).

A tool that sets Module.__call__ back to the function it read (FX's symbolic
tracer does, at the end of each trace) takes the twin out; `rearm()` puts it
back, and the probe calls it at each optimizer built and each audited step.
"""
import functools
import inspect
import sys
import weakref

from . import _dynamo_frames
from . import _track

_installed = None  # (Module class, original __call__, twin)

# The names the twin's test reads (its globals are this module's).
_compiling = None  # torch's is_dynamo_compiling, set by twin_of
_note = _track.forwarded.__setitem__
_id = id
_ref = weakref.ref
_listeners = _track.module_call_listeners
_notify = _track.notify_module_call
_off = type(None)  # () -> None, a C call; at install torch's set_eval_frame(None) (returns the callback that was on)
_wanted = _track.module_calls_wanted
_parented = _track.parents.data
_marked = _track.marked_modules  # the submodules whose calls mark the parts of a step (_phases.py)
_notify_marked = _track.notify_marked_call

# The text that replaces torch's first test; TEST is torch's test itself.
# Listeners hear of the module they want (_track.module_calls_wanted) or,
# before they want one, of modules with no parent: a submodule's eager call
# (in a compiled program's resumed frames, dynamo's callback on) runs no
# Python code of the probe, whose frames dynamo would convert and count.
# The one exception: submodules of _track.marked_modules (empty unless
# TPAUDIT_PEAK=backward asks for the phase marks), whose calls go to
# _track.marked_call_listeners with the call's arguments (the tuple and dict
# torch's function holds already), dynamo's callback off as for the others.
_NOTE = ("not (_compiling() or _note(_id(self), _ref(self)) or _listeners and (_id(self) in _wanted if _wanted else"
         " _id(self) not in _parented) and _notify(self, _off()) or _marked and _id(self) in _marked and _notify_marked(self, _off(), args, kwargs)"
         " or True) or ")
TEST = "if self._compiled_call_impl is not None:"
MAX_NOTED = 4096  # ids noted before dead entries are dropped (at the next step)


def compiling_test(torch):
    """The function that tells whether dynamo is tracing: torch.compiler's
    is_dynamo_compiling (2.4+), else its is_compiling (2.3), else
    torch._utils.is_compiling (2.1, 2.2: dynamo's constant_functions and
    its torch variables fold it to True), else None (no twin)."""
    compiler = getattr(torch, "compiler", None)
    for owner, name in ((compiler, "is_dynamo_compiling"), (compiler, "is_compiling"),
                        (getattr(torch, "_utils", None), "is_compiling")):
        test = getattr(owner, name, None)
        if callable(test):
            return test
    return None


def twin_of(call, compiling, test=TEST, note=_NOTE, scope=None):
    """The twin of torch's function `call` (by default Module's __call__),
    whose first test `test` is prefixed with `note`, its globals `scope` (by
    default this module's); None when its source is not the one the caller
    knows (the probe then does without: for __call__, models are found
    through the optimizers' params and the frames' locals only)."""
    lines, first = inspect.getsourcelines(call)
    found = [i for i, line in enumerate(lines) if line.strip() == test]
    if len(found) != 1 or first < 2:
        return None
    at = found[0]
    lines[at] = lines[at].replace("if ", "if " + note, 1)
    indent = lines[0][:len(lines[0]) - len(lines[0].lstrip())]
    # torch's def is a method: a class line above it keeps its indentation,
    # so lines and columns (a traceback's carets) are torch's own
    text = "\n" * (first - 2) + "class _Twin:\n" + "".join(lines)
    if not indent:
        text = "\n" * (first - 1) + "".join(lines)
    # the twin's globals are this module's (dynamo reads an inlined
    # function's globals through its module's name)
    scope = globals() if scope is None else scope
    scope["_compiling"] = compiling
    exec(compile(text, call.__code__.co_filename, "exec", dont_inherit=True), scope)
    twin = scope.pop("_Twin").__dict__[call.__name__] if indent else scope.pop(call.__name__)
    for attr in ("__module__", "__qualname__", "__doc__", "__annotations__"):
        try:
            setattr(twin, attr, getattr(call, attr))
        except (AttributeError, TypeError):
            pass
    if sys.version_info >= (3, 11):
        twin.__code__ = twin.__code__.replace(co_qualname=call.__code__.co_qualname)
    return twin


def install(torch):
    """Puts the twin on torch.nn.Module (once), as __call__ and under the
    original's own name (so it pickles by reference, as the original does)."""
    global _installed
    Module = torch.nn.Module
    call = Module.__dict__.get("__call__")
    compiling = compiling_test(torch)
    if not inspect.isfunction(call) or compiling is None or compiling() is not False:
        return  # (a test that raises here turns the part off, never a module call)
    twin = twin_of(call, compiling)
    if twin is not None and _dynamo_frames.found:  # (installed by _hooks._patch before this)
        global _off
        _off = functools.partial(_dynamo_frames.callback_set, None)
    if twin is not None:
        Module.__call__ = twin
        if Module.__dict__.get(call.__name__) is call:
            setattr(Module, call.__name__, twin)
        _installed = (Module, call, twin)


def is_twin(code):
    """Whether code is the twin's (its frames carry torch's file name)."""
    return _installed is not None and code is _installed[2].__code__


def rearm():
    """Puts the twin back where a tool restored the original function (and
    only there: another tool's own __call__ is left alone); drops dead
    entries once there are many."""
    if _installed is None:
        return
    Module, call, twin = _installed
    if Module.__dict__.get("__call__") is call:
        Module.__call__ = twin
    noted = _track.forwarded
    if len(noted) > MAX_NOTED:
        for key, ref in list(noted.items()):
            if ref() is None:
                noted.pop(key, None)


def from_frames(frame, Module):
    """Modules in the locals of frame and the frames above it, and in the
    attributes of their `self`s: the models a compiled function ran (its
    graph makes no eager call to note)."""
    found = []
    while frame is not None:
        local = frame.f_locals
        values = list(local.values())
        me = local.get("self")
        forget(frame, local)
        if me is not None and not isinstance(me, Module):
            try:
                values.extend(list(vars(me).values())[:256])
            except TypeError:
                pass
        found.extend(v for v in values if isinstance(v, Module))
        frame = frame.f_back
    return found


def forget(frame, local):
    """Empties the snapshot of a function frame's locals that reading
    f_locals left on the frame (Python 3.11, 3.12), so that it keeps no
    object the function lets go later (it is refilled at the next read);
    one that the program holds too (a locals() it kept) is left alone."""
    if (type(local) is dict and frame.f_code.co_flags & inspect.CO_OPTIMIZED
            and sys.getrefcount(local) <= 4):  # the frame's, the caller's, `local` and the argument
        local.clear()


def noted():
    """The live modules that ran forward in an eager call."""
    return [m for m in (ref() for ref in list(_track.forwarded.values())) if m is not None]
