"""Weak bookkeeping of models, optimizers and tensor names for the probe.

Nothing here keeps a user object alive: every map is keyed by id() and
holds weakrefs whose callbacks drop the entry.
"""
import sys
import weakref

from . import _dynamo_frames


class WeakIdMap:
    """id(obj) -> (weakref(obj), value); an entry vanishes with its object."""

    def __init__(self):
        self.data = {}

    def put(self, obj, value):
        key = id(obj)
        data = self.data

        def drop(_ref, key=key, data=data):
            data.pop(key, None)
        self.data[key] = (weakref.ref(obj, drop), value)

    def get(self, obj, default=None):
        entry = self.data.get(id(obj))
        if entry is None or entry[0]() is not obj:
            return default
        return entry[1]

    def live(self):
        for ref, value in list(self.data.values()):
            obj = ref()
            if obj is not None:
                yield obj, value


optimizers = WeakIdMap()   # optimizer -> None
forwarded = {}             # id(module that ran forward) -> weakref(module): _forward.py's twin fills it
module_call_listeners = []  # callables(module), called at each eager module call (notify_module_call)
backward_listeners = []    # callables(tensor), called at each eager Tensor.backward (notify_backward)
module_calls_wanted = set()  # ids of the modules the listeners want to hear of; empty: every module
marked_modules = {}        # id(submodule) -> its dotted name in the root module: their calls are heard too (_phases.py)
marked_call_listeners = []  # callables(module, args, kwargs), called at each eager call of a module of marked_modules
parents = WeakIdMap()      # module -> (weakref(parent), attribute name)
owners = WeakIdMap()       # parameter -> (weakref(module), attribute name)
names = WeakIdMap()        # tensor -> best dotted name
holders = WeakIdMap()      # optimizer -> [weakref(object holding it)] (frameworks/holders.py)
scanned = WeakIdMap()      # optimizer -> True once its gc referrer scan ran
step_counts = {}           # id(optimizer) -> [steps taken, next step due]; a new optimizer drops its id's


def coming_step(counts):
    """The step about to run: one more than the most steps an optimizer of
    `counts` (as step_counts) has taken."""
    return 1 + max((entry[0] for entry in counts.values()), default=0)


def notify_module_call(module, callback=None):
    """Calls each of module_call_listeners with module (the twin of
    Module.__call__ calls it at each eager module call while the list is not
    empty, having turned dynamo's frame callback off: `callback` is the one
    that was on, put back here)."""
    _notify(module_call_listeners, module, callback)


def notify_marked_call(module, callback=None, args=(), kwargs=None):
    """Calls each of marked_call_listeners with module, a submodule of
    marked_modules that is called eagerly, and the call's arguments (as
    notify_module_call)."""
    _notify(marked_call_listeners, (module, args, kwargs or {}), callback, spread=True)


def notify_backward(tensor, callback=None):
    """Calls each of backward_listeners with the tensor whose backward
    starts (the twin of Tensor.backward, _backward.py, as above)."""
    _notify(backward_listeners, tensor, callback)


def _notify(listeners, value, callback, spread=False):
    """Calls each of listeners with value (spread: with the items of the
    tuple value), then puts dynamo's frame callback `callback` back; a
    listener's exception is swallowed: it never reaches the program's call."""
    try:
        for listener in list(listeners):
            try:
                if spread:
                    listener(*value)
                else:
                    listener(value)
            except Exception:
                pass
    finally:
        if callback is not None:
            _dynamo_frames.callback_set(callback)


class _Changes:
    """Counts ownership changes (replacements, new optimizers) so that an
    exit audit is taken only when something changed after the last step audit."""
    count = 0
    at_last_step_audit = None


changes = _Changes()


def changed():
    changes.count += 1


def remember_holders(opt, found):
    """Adds found (objects holding opt) to its holders, as weakrefs."""
    refs = holders.get(opt)
    if refs is None:
        refs = []
        holders.put(opt, refs)
    known = {id(r()) for r in refs}
    for obj in found:
        if id(obj) not in known:
            try:
                refs.append(weakref.ref(obj))
            except TypeError:
                continue
            known.add(id(obj))


def holders_of(opt):
    refs = holders.get(opt) or ()
    return [obj for obj in (r() for r in refs) if obj is not None]


def compiled_from(module):
    """The module torch.compile(module) wrapped when module is its
    OptimizedModule, else None: the wrapper is no part of the model's names
    (a compiled model's findings name what eager mode names)."""
    if type(module).__name__ == "OptimizedModule":
        return module.__dict__.get("_modules", {}).get("_orig_mod")
    return None


def _parent(module):
    """(live parent, attribute name) of module, or None for a root (no
    link, a dead parent, or torch.compile's wrapper above it)."""
    link = parents.get(module)
    if link is None:
        return None
    parent = link[0]()
    if parent is None or compiled_from(parent) is module:
        return None
    return parent, link[1]


def module_path(module, depth=0):
    """Dotted path of module from its root ("" for a root), None if detached."""
    parts = []
    while depth < 64:
        link = _parent(module)
        if link is None:
            return ".".join(reversed(parts))
        parent = link[0]
        if parent._modules.get(link[1]) is not module:
            return None
        parts.append(link[1])
        module = parent
        depth += 1
    return ".".join(reversed(parts))


def module_top(module):
    """The root module holding module, or None when it was replaced out of a
    live parent.  A dead parent (a wrapper let go) makes module a root."""
    for _ in range(64):
        link = _parent(module)
        if link is None:
            return module
        parent = link[0]
        if parent._modules.get(link[1]) is not module:
            return None
        module = parent
    return module


def param_name(param):
    """Best dotted name of a parameter: its current path, else the last one known."""
    link = owners.get(param)
    if link is not None:
        module = link[0]()
        if module is not None and module._parameters.get(link[1]) is param:
            prefix = module_path(module)
            if prefix is not None:
                return prefix + "." + link[1] if prefix else link[1]
    return names.get(param)


def remember_name(tensor, name):
    if name:
        names.put(tensor, name)


def is_fake(t):
    """True for a FakeTensor (dynamo's, export's: example values it keeps)
    or a tensor over one: it has no memory, and reading its data pointer
    makes torch print a warning into the program's stderr."""
    fake = sys.modules.get("torch._subclasses.fake_tensor")
    if fake is None:
        return False
    try:
        return bool(fake.is_fake(t))
    except Exception:
        return True
