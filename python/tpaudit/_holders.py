"""Holder paths: who keeps a tensor alive, written as the user would write it.

find(targets) returns, for each target tensor that some root reaches, the
shortest reference chain from a root as text ("__main__.kept[59]",
"self.history of a Trainer", "trainer.callbacks[2]['outputs']['logits']").

How: a backward breadth-first walk from the targets, one level of
referrers at a time, stopping at the roots: module globals, the locals of
every live frame of every thread (sys._current_frames) and classes.  A small
level (up to FEW objects) takes one gc.get_referrers call, a scan of the
heap in C; after an uncaught exception the frames its traceback keeps
alive (the loop's function that raised, with its locals) are roots too
(_ended_frames); a larger one takes one pass over gc.get_objects() in chunks
whose referents are tested against the level's ids in C, so a level costs
about one heap scan however many tensors are in it.  The part of the heap
found is then walked forward from the roots it reached to name each
target's shortest chain, step by step from the parent's type (a frame's
local met on the way, the loop's `logits` or the `out` whose .logits it
is, is also walked up for LOCAL_CLIMB levels from the target, and a chain
from another root wins over the local: a list that keeps each step's
logits keeps the newest too, so its bytes at a step's audit are those of
every step so far); its
container is the chain without its last index (and without the index of
a tuple holding it, so a cached (logits, loss) pair groups by the cache;
a dict or tuple that is a list's element groups by the list).  Closure
cells, generator frames, functools caches and instance attributes are named
on the way.

It never runs user code: references come from gc (the types' C traversal),
steps are named by reading builtin containers (dict, list, tuple, deque,
cells) and an instance's __dict__ or slots only through the descriptors
CPython itself made (instance_dict; never a property, __getattr__ or
__repr__ of the user's), and types are tested with is_a, that is
issubclass(type(obj), ...), never isinstance: isinstance asks the object
for its __class__ when its type does not match, and a proxy (a mock, a
lazy module or a wrapper that forwards attribute reads to what it stands
for) answers with its own code, which may lie about the class, import a
package or raise, in the middle of an audit.  Everything it holds is
dropped before it returns.

This is the probe's one walk on gc referrers: referrers(level, blocked),
one level of it, is also how frameworks/holders.py finds the wrappers
above an optimizer, under the same rule (is_a, instance_dict).
"""
import collections
import gc
import sys
import types

from ._stacks import TORCH_PART as _TORCH_PART
from ._unmeasured import PREFIX as _PROBE_PREFIX

MAX_DEPTH = 12      # references from a root to a target, at most
FEW = 96            # a level this small asks gc.get_referrers; a larger one scans the heap
CHUNK = 256         # objects per gc.get_referents call of a heap scan
MAX_LEVEL = 20000   # objects a level keeps, at most (past it the walk gives up on the rest)
LOCAL_CLIMB = 4     # levels from the target a frame's local is walked up for a longer-lived holder
# Frames that returned but whose locals are still roots for the audit being
# taken: the pytest plugin's test function, kept until its end-of-test audit.
finished_frames = []

_PLAIN_KEYS = (str, int, float, bool, type(None))
_GETSET = type(types.FunctionType.__dict__["__code__"])
_MEMBER = type(type("_Slots", (), {"__slots__": ("a",)}).__dict__["a"])
_MODULE_DICT = types.ModuleType.__dict__["__dict__"]
_TYPE_QUALNAME = type.__dict__["__qualname__"]
_TYPE_NAME = type.__dict__["__name__"]
_TYPE_MRO = type.__dict__["__mro__"]
_TYPE_DICT = type.__dict__["__dict__"]
_CONTAINERS = (list, dict, tuple, set, frozenset, collections.deque, collections.OrderedDict,
               collections.defaultdict)
_CO_OPTIMIZED = 0x1  # inspect.CO_OPTIMIZED: a function's frame, whose f_locals is a snapshot


def _name(kind):
    """A class's __name__ through type's own descriptor (a metaclass's
    __getattribute__ is user code)."""
    return _TYPE_NAME.__get__(kind, type(kind))


def _class_dicts(kind):
    """The dicts (mapping proxies) of kind's classes, in method resolution order."""
    return [_TYPE_DICT.__get__(k, type(k)) for k in _TYPE_MRO.__get__(kind, type(kind))]
_ATTRS, _CLOSURE = "attrs", "closure"
# A container that no longer holds the child when the step is named: the
# reference was dropped after the referrer scan (a frame's f_locals snapshot,
# refreshed when a generator's locals are read, drops the values of earlier
# steps), so it is no path.
GONE = "[?]"


def _key_text(key):
    kind = type(key)
    if any(kind is k for k in _PLAIN_KEYS):  # `in` would compare classes with ==
        text = repr(key)
        return text if len(text) <= 40 else text[:37] + "..."
    return "<%s>" % _name(kind)


def _safe_slot(obj, name):
    """The instance dict or a slot of obj through CPython's own descriptor
    for `name` found in the classes' dicts (never a user's property)."""
    for attrs in _class_dicts(type(obj)):
        desc = attrs.get(name)
        if desc is not None:
            if type(desc) is _GETSET or type(desc) is _MEMBER:
                try:
                    return desc.__get__(obj, type(obj))
                except (AttributeError, TypeError):
                    return None
            return None
    return None


def _attr_of(obj, child):
    """The attribute of obj (its __dict__ or a slot) that is child, or None."""
    d = instance_dict(obj)
    if d is not None:
        for k, v in d.items():
            if v is child:
                return k
    for attrs in _class_dicts(type(obj)):
        slots = attrs.get("__slots__")
        if type(slots) is str:
            slots = (slots,)
        if type(slots) is tuple or type(slots) is list:
            for name in slots:
                if type(name) is str and _safe_slot(obj, name) is child:
                    return name
    return None


def is_a(obj, klass):
    """isinstance without asking obj for its __class__ (which may be user code)."""
    return issubclass(type(obj), klass)


def instance_dict(obj):
    """obj's __dict__ through CPython's own descriptor (never a property or a
    __getattr__ of the user's), or None when it has none."""
    d = _safe_slot(obj, "__dict__")
    return d if type(d) is dict else None


class _Roots:
    """The roots of this moment: module globals' dicts and the values of the
    locals of every live frame of every thread (frames of files under
    skip_file, the walker's own, left out).  Only ids and names are kept."""

    def __init__(self, skip_file):
        self.modules = {}  # id(module dict) -> module name
        self.locals = {}   # id(value) -> (variable name, class name of the value)
        self.running = set()  # ids of a running module body's variables (below)
        self.snapshots = []  # the f_locals snapshots read (forget() empties them)
        self.in_torch = {}  # id(value) -> variable, of torch's own running frames (_ledger's step_own)
        for name, mod in list(sys.modules.items()):
            if is_a(mod, types.ModuleType):
                try:
                    d = _MODULE_DICT.__get__(mod, type(mod))
                except Exception:
                    continue
                if type(d) is dict and (id(d) not in self.modules or name == "__main__"):
                    self.modules[id(d)] = name
        # this thread's list holds this very frame: it is emptied after the
        # loop, or the cycle would keep the program's frames (and their
        # tensors) alive until the next collection
        frames = list(sys._current_frames().values())
        threads = len(frames)
        frames += _ended_frames() + list(finished_frames)
        try:
            for at, frame in enumerate(frames):
                while frame is not None:
                    code = frame.f_code
                    file = code.co_filename
                    if file.startswith(_PROBE_PREFIX):  # the probe's own code, loaded under the shim
                        file = file[len(_PROBE_PREFIX):]
                    if not file.startswith(skip_file):
                        try:
                            names = frame.f_locals
                        except Exception:
                            names = None
                        if type(names) is dict and names is not frame.f_globals:
                            if code.co_flags & _CO_OPTIMIZED and frame.f_trace is None:
                                self.snapshots.append(names)
                            for var, value in names.items():
                                self.locals.setdefault(id(value), (var, _name(type(value))))
                            if at < threads and _TORCH_PART in file:
                                for var, value in names.items():
                                    self.in_torch.setdefault(id(value), var)
                        elif type(names) is dict and code.co_name == "<module>":
                            self._module_body(names)
                    frame = frame.f_back
        finally:
            frames.clear()
        main = sys.modules.get("__main__")
        if is_a(main, types.ModuleType):
            self._module_body(_MODULE_DICT.__get__(main, type(main)))

    def _module_body(self, names):
        """The variables of a module body that is running (a loop at module
        level) or ran (the script's, `__main__`, at exit): those that are not
        a builtin container (the loop's `out`, `logits`) are climbed from as
        a function's locals are, so a list the module also keeps is the
        holder of the newest tensor too; named `module.var` when nothing
        else holds them."""
        if type(names) is not dict:
            return
        module = self.modules.get(id(names), "__main__")
        for var, value in names.items():
            kind = type(value)
            if any(kind is k for k in _CONTAINERS) or is_a(value, (types.ModuleType, type, types.FunctionType)):
                continue
            if id(value) not in self.locals:
                self.locals[id(value)] = (module + "." + var, _name(kind))
                self.running.add(id(value))

    def forget(self):
        """Empties the f_locals snapshots the walk made: before Python 3.13 a
        function frame keeps the dict that reading f_locals fills, and it
        would keep the values its variables had then alive after the program
        deletes them (a `del model, opt` must free them).  Only a function's
        own snapshot is emptied (never a class body's or exec's namespace),
        and not while a tracer runs in that frame (it writes the dict back)."""
        for names in self.snapshots:
            names.clear()
        self.snapshots = []

    def is_local(self, obj):
        return id(obj) in self.locals and id(obj) not in self.modules

    def root(self, obj):
        """(text, mode of the next step, suffix of its paths) when obj is a
        root, else None; a method's `self` gets the suffix " of a <class>"."""
        oid = id(obj)
        name = self.modules.get(oid)
        if name is not None:
            return name, _ATTRS, ""
        local = self.locals.get(oid)
        if local is not None:
            return local[0], None, (" of a " + local[1] if local[0] == "self" else "")
        if is_a(obj, type):
            return _TYPE_QUALNAME.__get__(obj, type(obj)), None, ""
        return None


def _ended_frames():
    """The innermost frame of the traceback of the exception that ended the
    run (sys.last_exc, 3.12+, or sys.last_traceback, set before the exit
    handlers run) and of the one being handled now: the frames the program
    left by raising, which the traceback keeps alive with their locals."""
    out = []
    last = getattr(sys, "last_exc", None)
    tracebacks = [getattr(last, "__traceback__", None) if last is not None else getattr(sys, "last_traceback", None),
                  sys.exc_info()[2]]
    for tb in tracebacks:
        while tb is not None and type(tb) is types.TracebackType:
            if tb.tb_next is None:
                out.append(tb.tb_frame)
            tb = tb.tb_next
    return out


def _edge(parent, child, mode):
    """(text of the step parent -> child, the mode of the next step)."""
    kind = type(parent)
    if is_a(parent, dict):
        for k, v in dict.items(parent):
            if v is child:
                return ("." + k if mode == _ATTRS and type(k) is str else "[%s]" % _key_text(k)), None
            if k is child:
                return "<key of %s>" % _name(kind), None
        return GONE, None
    if is_a(parent, (list, tuple, collections.deque)):
        if mode == _CLOSURE and kind is tuple:
            return "", None
        for i, v in enumerate(list.__iter__(parent) if is_a(parent, list) else
                              tuple.__iter__(parent) if is_a(parent, tuple) else
                              collections.deque.__iter__(parent)):
            if v is child:
                return "[%d]" % i, None
        return GONE, None
    if kind is types.CellType:
        return "", None
    if kind is types.FunctionType:
        closure = parent.__closure__
        if closure is child:
            return "", _CLOSURE
        if parent.__defaults__ is child:
            return "<defaults of %s>" % parent.__qualname__, None
        if type(child) is dict:
            return "<%s>" % parent.__qualname__, None
        return "<%s>" % parent.__qualname__, None
    if kind is types.GeneratorType or kind is types.CoroutineType:
        frame = parent.gi_frame if kind is types.GeneratorType else parent.cr_frame
        name = parent.__qualname__
        if frame is not None:
            try:
                for var, value in frame.f_locals.items():
                    if value is child:
                        return "<generator %s>.%s" % (name, var), None
            except Exception:
                pass
        return "<generator %s>" % name, None
    if kind is types.ModuleType:
        return "", _ATTRS
    if is_a(parent, type):
        if type(child) is types.MappingProxyType or type(child) is dict:
            return "", _ATTRS
        return "", None
    if _name(kind) == "_lru_cache_wrapper":
        return "<lru_cache>", None
    if kind is types.MethodType:
        return ".__self__" if parent.__self__ is child else "<method>", None
    if kind is types.FrameType:
        return "", None
    # an instance of some class: its __dict__ (then attributes), or an attribute directly
    if type(child) is dict and instance_dict(parent) is child:
        return "", _ATTRS
    name = _attr_of(parent, child)
    if name is not None:
        return "." + name, None
    return "<%s>" % _name(kind), None


def find(targets, skip_file, ignore=(), in_torch=None):
    """{id(target): (path, container path, holder class name, whether only a
    target that is a frame's local reaches it)} for the targets a root
    reaches within MAX_DEPTH references.  skip_file: frames of
    files under it are the walker's own, never roots; ignore: ids of the
    caller's own containers, never followed; in_torch: a dict that gets
    {id(value): variable} of torch's own frames on every thread, as the
    roots read them."""
    was_enabled = gc.isenabled()
    gc.disable()  # the walk makes containers; no collection in between
    walk = _Walk(targets, skip_file, ignore)
    try:
        if in_torch is not None:
            in_torch.update(walk.roots.in_torch)
        walk.run()
        return walk.paths()
    finally:
        walk.drop()
        if was_enabled:
            gc.enable()


def referrers(level, blocked):
    """[(parent, [ids of its children in level])] for every gc object that
    refers to an object of level, frames and the objects whose ids are in
    blocked (the caller's own containers) left out: one gc.get_referrers
    call for a level of up to FEW objects, else one pass over the heap.
    The containers this call makes are added to blocked."""
    ids = set(map(id, level))
    out = []
    blocked.update((id(ids), id(out)))
    if len(level) <= FEW:
        args = tuple(level)  # passed on as the call's own argument tuple, which refers to them all
        blocked.add(id(args))
        found = gc.get_referrers(*args)
        blocked.add(id(found))
        _add_parents(found, ids, blocked, out)
        found.clear()
        return out
    heap = gc.get_objects()
    blocked.add(id(heap))
    isdisjoint = ids.isdisjoint
    for start in range(0, len(heap), CHUNK):
        chunk = heap[start:start + CHUNK]
        if not isdisjoint(map(id, gc.get_referents(*chunk))):
            _add_parents(chunk, ids, blocked, out)
    heap.clear()
    return out


def _add_parents(candidates, ids, blocked, out):
    """Appends (parent, ids of its children in `ids`) for each candidate that
    refers to one of `ids`, leaving out blocked objects and frames."""
    for p in candidates:
        if id(p) in blocked or type(p) is types.FrameType:
            continue
        kids = [id(c) for c in gc.get_referents(p) if id(c) in ids]
        if kids:
            out.append((p, kids))


class _Walk:
    def __init__(self, targets, skip_file, ignore):
        self.roots = _Roots(skip_file)
        self.targets = targets
        self.objs = {}       # id -> object found (targets and their holders)
        self.parents = {}    # id(child) -> [parents]
        self.hits = {}       # id(root object) -> (text, mode)
        self.children = {}   # id(parent) -> [ids of its children found]
        self.blocked = set(ignore)
        self.locals = set()  # ids of frames' locals found (targets or holders), named after other roots
        self._own(self.objs, self.parents, self.hits, self.children, self.blocked, self.locals, targets)

    def _own(self, *containers):
        for c in containers:
            self.blocked.add(id(c))

    def _reached(self, seeds):
        """ids below the objects of seeds (ids), over the references found so
        far (a running module body's variable is a root of its own, not
        reached from its module)."""
        reached = set(seeds)
        todo = list(seeds)
        children = self.children
        modules, running = self.roots.modules, self.roots.running
        while todo:
            parent = todo.pop()
            for c in children.get(parent, ()):
                if c not in reached and not (c in running and parent in modules):
                    reached.add(c)
                    todo.append(c)
        return reached

    def _left(self, climbing):
        """Whether a target is not yet below a root reached (a forward pass
        from the roots reached over the references found so far); while
        climbing, a target that is a local is left until another root
        reaches it."""
        seeds = [h for h in self.hits if not (climbing and h in self.locals)]
        reached = self._reached(seeds)
        return any(id(t) not in reached for t in self.targets)

    def run(self):
        level = []
        for t in self.targets:
            tid = id(t)
            if tid in self.objs:
                continue
            self.objs[tid] = t
            hit = self.roots.root(t)
            if hit is not None:
                self.hits[tid] = hit
                if self.roots.is_local(t):
                    self.locals.add(tid)
                    level.append(t)
            else:
                level.append(t)
        depth = 0
        while level and depth < MAX_DEPTH and self._left(depth < LOCAL_CLIMB):
            depth += 1
            nxt = []
            self._own(level, nxt)
            for p, kid_ids in self._referrers(level):
                pid = id(p)
                for k in kid_ids:
                    lst = self.parents.get(k)
                    if lst is None:
                        lst = self.parents[k] = []
                        self._own(lst)
                    lst.append(p)
                    kids = self.children.get(pid)
                    if kids is None:
                        kids = self.children[pid] = []
                        self._own(kids)
                    kids.append(k)
                if pid in self.objs:
                    continue
                self.objs[pid] = p
                hit = self.roots.root(p)
                if hit is not None:
                    self.hits[pid] = hit
                    if self.roots.is_local(p) and len(nxt) < MAX_LEVEL:
                        # a frame's local (the loop's `out` whose .logits a
                        # global list also keeps): climbed on like a local target
                        self.locals.add(pid)
                        nxt.append(p)
                elif len(nxt) < MAX_LEVEL and not is_a(p, types.ModuleType):
                    nxt.append(p)
            level = nxt

    def _referrers(self, level):
        return referrers(level, self.blocked)

    def paths(self):
        """Breadth-first from the roots reached, over the found references:
        each target's shortest chain, named step by step."""
        children = self.children
        best = {}  # id(obj) -> (path, mode of its next step, parent id, last step, suffix)
        queue = collections.deque()
        # Roots other than the targets that are locals first: the locals'
        # own paths are taken only for those no other root reached.
        later = [pid for pid in self.hits if pid in self.locals]
        for pid, (text, mode, suffix) in self.hits.items():
            if pid not in self.locals:
                best[pid] = (text, mode, None, "", suffix)
                queue.append(pid)
        objs = self.objs
        targets = {id(t) for t in self.targets}
        self._breadth_first(best, queue, children, objs, targets, self.roots)
        early = set(best)
        for pid in later:
            if pid not in best:
                text, mode, suffix = self.hits[pid]
                best[pid] = (text, mode, None, "", suffix)
                queue.append(pid)
        # the references left for later: a generator's locals, named from the generator first
        queue.extend(sorted(early, key=lambda i: type(objs.get(i)) not in (types.GeneratorType, types.CoroutineType)))
        self._breadth_first(best, queue, children, objs, ())
        self._prefer_lists(best)
        out = {}
        for t in self.targets:
            entry = best.get(id(t))
            if entry is None:
                continue
            path, _mode, pid, step, suffix = entry
            cid = id(t)
            # a tuple reached by index is one element kept whole ((logits, loss)): climb over it
            while (pid is not None and type(objs.get(pid)) is tuple and step.startswith("[")
                   and best[pid][2] is not None):
                cid, step, pid = pid, best[pid][3], best[pid][2]
            cid, step, pid = _list_element(objs, best, cid, step, pid)
            holder = objs.get(pid) if pid is not None else None
            container = best[pid][0] if pid is not None and step.startswith("[") else best[cid][0]
            out[id(t)] = (path + suffix, container + suffix, _name(type(holder)) if holder is not None else None,
                          id(t) not in early and _root_of(best, id(t)) not in self.roots.running)
        best.clear()
        early.clear()
        targets.clear()
        return out

    def _prefer_lists(self, best):
        """A target named by an attribute, a variable or a dict's key that a
        list or deque reached also holds is named as that list's element:
        the newest tensor of a loop that keeps each step's (`state.seen`) is
        also its `state.last` or `out['logits']`, and the list is what grows."""
        objs = self.objs
        for t in self.targets:
            entry = best.get(id(t))
            if entry is None:
                continue
            holder = type(objs.get(entry[2]))
            if holder is list or holder is collections.deque:
                continue
            for parent in self.parents.get(id(t), ()):
                up = best.get(id(parent))
                if up is None or not (type(parent) is list or type(parent) is collections.deque):
                    continue
                step, _mode = _edge(parent, t, up[1])
                if step.startswith("["):
                    best[id(t)] = (up[0] + step, None, id(parent), step, up[4])
                    break

    @staticmethod
    def _breadth_first(best, queue, children, objs, later, roots=None):
        """Names each object reached from the queued ones by its shortest
        chain; a target of `later` is not taken from a generator or its
        locals' snapshot (the generator's local `logits`, while its list
        `seen` keeps them all); with roots, a running module body's variable
        is not taken from its module (it is named after the other roots)."""
        running = roots.running if roots is not None else ()
        while queue:
            oid = queue.popleft()
            path, mode, _pid, _step, suffix = best[oid]
            obj = objs[oid]
            up = objs.get(_pid) if _pid is not None else None
            paused = any(type(o) is types.GeneratorType or type(o) is types.CoroutineType for o in (obj, up))
            from_module = bool(running) and oid in roots.modules
            for cid in children.get(oid, ()):
                if cid in best or (paused and cid in later) or (from_module and cid in running):
                    continue
                child = objs.get(cid)
                if child is None:
                    continue
                try:
                    step, next_mode = _edge(obj, child, mode)
                except Exception:
                    step, next_mode = "<%s>" % _name(type(obj)), None
                if step is GONE:
                    continue
                if type(obj) is tuple and mode == _CLOSURE and type(child) is types.CellType:
                    step = "<closure %s>" % _closure_var(objs.get(best[oid][2]), obj, child)
                best[cid] = (path + step, next_mode, oid, step, suffix)
                queue.append(cid)

    def drop(self):
        self.roots.forget()
        self.roots.in_torch.clear()
        for c in (self.objs, self.parents, self.hits, self.children, self.blocked):
            c.clear()
        self.targets = None


def _root_of(best, oid):
    """The id of the root whose chain names oid (a module body's variable
    is named after the other roots, but it is a global, not a frame's local)."""
    for _ in range(MAX_DEPTH + 2):
        parent = best[oid][2]
        if parent is None:
            return oid
        oid = parent
    return oid


def _list_element(objs, best, cid, step, pid):
    """(cid, step, pid) of the list element that holds a target through
    dicts and tuples reached by index (a model's output appended to a list:
    `outputs[9]['logits']` groups by `outputs`), else, for a target reached
    by an attribute or a key, of the outermost list element that holds it
    through plain objects (_outer_list_element), else as given."""
    at = (cid, step, pid)
    while pid is not None and step.startswith("[") and is_a(objs.get(pid), (dict, tuple)):
        up = best[pid]
        if up[2] is None or not up[3].startswith("["):
            break
        cid, step, pid = pid, up[3], up[2]
        if is_a(objs.get(pid), (list, collections.deque)):
            return cid, step, pid
    if pid is not None and not is_a(objs.get(pid), (list, collections.deque)):
        return _outer_list_element(objs, best, at)
    return at


# what a chain climbs through to the list that groups a target: plain data, never a frame, a
# function, a class, a module or a generator (each a holder of its own kind)
_NOT_PLAIN = (types.FrameType, types.FunctionType, types.GeneratorType, types.CoroutineType, types.ModuleType,
              types.CellType, types.MethodType, type)


def _plain(obj):
    if is_a(obj, _NOT_PLAIN):
        return False
    nn = getattr(sys.modules.get("torch"), "nn", None)
    return nn is None or not is_a(obj, nn.Module)


def _outer_list_element(objs, best, at):
    """(cid, step, pid) of the outermost list or deque element above a
    target kept as an attribute or a dict's value of plain objects (each
    generate() output a loop keeps holds its KV cache as
    `kept[3]['past_key_values'].layers[0].keys`, which groups by `kept`,
    the list that grows), else at."""
    found = at
    cid, _step, pid = at
    for _ in range(MAX_DEPTH):
        parent = objs.get(pid)
        if parent is None or not _plain(parent):
            break
        up = best[cid]
        if is_a(parent, (list, collections.deque)) and up[3].startswith("["):
            found = (cid, up[3], pid)
        if best[pid][2] is None:
            break
        cid, pid = pid, best[pid][2]
    return found


def _closure_var(fn, closure, cell):
    """The free variable a closure's cell stands for ('acts of hook')."""
    if type(fn) is types.FunctionType and fn.__closure__ is closure:
        for i, c in enumerate(closure):
            if c is cell:
                return "%s of %s" % (fn.__code__.co_freevars[i], fn.__qualname__)
    return "?"
