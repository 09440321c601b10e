"""The memory ledger of an audit: every live tensor storage gets one owner.

record(rec, models, optimizers) writes, inside the open audit, one row per
owner group and device (docs/schema.md, table ledger): parameters by module,
gradients by module, optimizer state by optimizer, stale tensors (held by an
optimizer for a parameter no live model has), tensors held by other Python
objects by holder (_holders.py), tensors saved in live autograd graphs by
the tensor whose graph it is (a graph a holder keeps: one row per module
whose forward made its saved tensors, each row's path 'saved for backward
in <module>', the rows of the holder adding up to its graph's bytes), on a GPU the cuBLAS and cuBLASLt workspaces
PyTorch's allocator gave out (kind 'library'), at an OOM in backward the
autograd engine's buffers in flight (kind 'autograd'; _workspaces.py) and
the allocator's free cache, and what is left as unattributed; plus the
measured total the owners add up to.  Each storage is counted once, under the first owner in that order.

Torch functions run with torch-function overrides disabled, so a user's
tensor subclass is never asked anything; tensors of other subclasses whose
storage cannot be read are left out.
"""
import collections
import gc
import itertools
import weakref

from . import _allocator
from . import _holders
from . import _made_by
from . import _parts
from . import _saved_hooks
from . import _track
from . import _unmeasured
from . import _workspaces
from ._structs import GRAPH_OF, SAVED_IN  # the owner prefixes of autograd rows (tpaudit.h)

MODULE_DEPTH = 3          # parameters are grouped by their module path cut to this many parts
MAX_GRAPH_NODES = 200000  # autograd nodes one audit walks, at most
MAX_SHAPES = 4
_MADE_KINDS = ("held", "autograd")  # the groups whose creation line is told
owners_out = None  # a KeptOwners: the next ledger fills it (_peak_moment.py)
ORDER = ("parameter", "gradient", "optimizer_state", "stale", "held", "autograd", "unattributed")


class _Group:
    __slots__ = ("kind", "owner", "device", "holder_class", "bytes", "tensors", "shapes", "largest",
                 "dtype", "with_graph", "path", "path_rank", "newest", "made_bytes", "created_at", "made_in")

    def __init__(self, kind, owner, device, holder_class=None):
        self.kind, self.owner, self.device, self.holder_class = kind, owner, device, holder_class
        self.bytes = self.tensors = self.with_graph = self.largest = 0
        self.shapes = collections.Counter()
        self.dtype = self.path = self.created_at = None
        self.path_rank = self.newest = self.made_bytes = -1
        self.made_in = None  # a held graph's saved bytes: module -> [bytes, tensors], None: not split

    def row(self):
        shapes = [s for s, _ in self.shapes.most_common(MAX_SHAPES)]
        return {"device": self.device, "owner_kind": self.kind, "owner": self.owner,
                "holder_class": self.holder_class, "path": self.path, "bytes": self.bytes,
                "tensors": self.tensors, "shapes": "[%s]" % ",".join(shapes) if shapes else None,
                "dtype": self.dtype, "with_graph": self.with_graph, "created_at": self.created_at}

    def split_rows(self):
        """The group's rows: one, or where its bytes are told by the module
        that made them, one per module (the most bytes first, path 'saved
        for backward in <module>'; the bytes of no known module in a row
        with no path), the group's shapes, dtype, tensors with a graph and
        creation line on the first only, so that every reader summing a
        holder's rows by owner reads what its one row said."""
        whole = self.row()
        if not self.made_in:
            return [whole]
        parts = sorted(self.made_in.items(), key=lambda m: (-m[1][0], m[0] or ""))
        rows = []
        for module, (nbytes, tensors) in parts:
            row = dict(whole, bytes=nbytes, tensors=tensors, path=None if module is None else SAVED_IN + module)
            if rows:
                row.update(shapes=None, dtype=None, with_graph=0, created_at=None)
            rows.append(row)
        return rows


class KeptOwners:
    """What one ledger leaves for a later reader: owners, (device, data_ptr)
    -> (kind, owner) of each storage it counted, and weak references to the
    models it walked."""
    __slots__ = ("owners", "models")

    def __init__(self):
        self.owners, self.models = {}, []


class Ledger:
    """One audit's ledger: add() tensors owner by owner, then rows()."""

    def __init__(self, torch, created=None):
        self.torch = torch
        self.claimed = {}   # (device, data_ptr) -> storage bytes, first owner wins
        self.groups = {}    # (kind, owner, device) -> _Group
        self.dtypes = {}
        self.created = created or {}  # data_ptr -> (sequence, stack text): _growth.py's recording
        self.owner_of = None  # (device, data_ptr) -> (kind, owner) when kept (owners_out)

    def storage_of(self, t):
        """(device text, data_ptr, storage bytes) or None."""
        try:
            if type(t).__name__ == "DTensor":
                t = t._local_tensor  # this rank's shard holds the bytes
            if t.is_meta or t.layout != self.torch.strided or _track.is_fake(t):
                return None
            s = t.untyped_storage()
            ptr, nbytes = s.data_ptr(), s.nbytes()
        except Exception:
            return None
        if not ptr or not nbytes:
            return None
        return str(t.device), ptr, nbytes

    def add(self, kind, owner, t, holder_class=None, path=None, storage=None, made_in=False):
        """Adds tensor t to the group (kind, owner) unless its storage has an
        owner already; True when it counted.  made_in: for a held graph's
        saved tensor, the module whose forward made it (None: not known)."""
        where = storage or self.storage_of(t)
        if where is None:
            return False
        device, ptr, nbytes = where
        key = (device, ptr)
        if key in self.claimed:
            return False
        self.claimed[key] = nbytes
        if self.owner_of is not None:  # a held graph's saved tensor: the module that made it
            self.owner_of[key] = (kind, SAVED_IN + made_in if made_in else owner)
        g = self.groups.get((kind, owner, device))
        if g is None:
            g = self.groups[(kind, owner, device)] = _Group(kind, owner, device, holder_class)
        g.bytes += nbytes
        g.tensors += 1
        if made_in is not False:
            if g.made_in is None:
                g.made_in = {}
            part = g.made_in.setdefault(made_in, [0, 0])
            part[0] += nbytes
            part[1] += 1
        shape = "[%s]" % ",".join(map(str, t.shape))
        g.shapes[shape] += nbytes
        if nbytes > g.largest:
            g.largest = nbytes
            dtype = t.dtype
            text = self.dtypes.get(dtype)
            if text is None:
                text = self.dtypes[dtype] = str(dtype).replace("torch.", "")
            g.dtype = text
        try:
            if t.grad_fn is not None:
                g.with_graph += 1
        except Exception:
            pass
        if path is not None:
            rank = _path_rank(path)
            if rank >= g.path_rank:
                g.path, g.path_rank = path, rank
        # the creation line told is that of the largest tensor recorded, the newest of those
        made = self.created.get(ptr) if kind in _MADE_KINDS else None
        if made is not None and (nbytes, made[0]) > (g.made_bytes, g.newest):
            g.made_bytes, (g.newest, g.created_at) = nbytes, made
        return True

    def rows(self, measured, libraries=None):
        """The groups' rows, each device's 'measured' row first, then owners
        in ORDER, the libraries' allocations, allocator_cache and
        unattributed last.  measured: device -> (how, bytes or None for the
        storages found, allocator cache bytes); libraries: device -> {(owner
        kind, owner): bytes} of allocations that are no tensor
        (_workspaces.named)."""
        out = []
        devices = sorted({g.device for g in self.groups.values()} | set(measured))
        found = collections.Counter()
        for (device, _ptr), nbytes in self.claimed.items():
            found[device] += nbytes
        for device in devices:
            how, total, cache = measured.get(device, ("live tensor storages", None, 0))
            if total is None:
                total = found[device]
            tensors = sum(g.tensors for g in self.groups.values() if g.device == device)
            out.append({"device": device, "owner_kind": "measured", "owner": how, "bytes": total,
                        "tensors": tensors, "with_graph": 0})
            mine = [g for g in self.groups.values() if g.device == device]
            mine.sort(key=lambda g: (ORDER.index(g.kind), -g.bytes))
            attributed = 0
            for g in mine:
                if g.kind != "unattributed":
                    out.extend(g.split_rows())
                    attributed += g.bytes
            for (kind, owner), nbytes in sorted((libraries or {}).get(device, {}).items()):
                out.append({"device": device, "owner_kind": kind, "owner": owner, "bytes": nbytes,
                            "tensors": 0, "with_graph": 0})
                attributed += nbytes
            if cache:
                out.append({"device": device, "owner_kind": "allocator_cache", "bytes": cache,
                            "tensors": 0, "with_graph": 0})
            left = max(0, total - attributed - cache)
            if left:
                out.append({"device": device, "owner_kind": "unattributed", "bytes": left,
                            "tensors": sum(g.tensors for g in mine if g.kind == "unattributed"),
                            "with_graph": 0})
        return out


def _path_rank(path):
    """The trailing index of a path ('kept[59]' -> 59), so a group shows its newest element."""
    if path.endswith("]"):
        head, _, tail = path[:-1].rpartition("[")
        if tail.isdigit():
            return int(tail)
    return 0


def module_group(path):
    """'transformer.h.0.attn.c_attn.weight' -> 'transformer.h.0'."""
    parts = path.split(".")[:-1]
    return ".".join(parts[:MODULE_DEPTH])


def _optimizer_names(optimizers):
    """A name per optimizer: its class, with '#n' when several share it."""
    counts = collections.Counter(type(o).__name__ for o in optimizers)
    seen = collections.Counter()
    names = {}
    for o in optimizers:
        cls = type(o).__name__
        seen[cls] += 1
        names[id(o)] = cls if counts[cls] == 1 else "%s#%d" % (cls, seen[cls])
    return names


def _tensor_type_ids(torch):
    """ids of torch.Tensor and of every subclass of it defined so far
    (type's own __subclasses__, never a metaclass of the user's)."""
    subclasses = type.__dict__["__subclasses__"]
    ids, todo = set(), [torch.Tensor]
    while todo:
        kind = todo.pop()
        if id(kind) not in ids:
            ids.add(id(kind))
            todo.extend(subclasses(kind))
    return ids


def live_tensors(torch):
    """Every tensor object the garbage collector tracks (the filter runs in
    C: type, id and a set lookup of ints for each object)."""
    objs = gc.get_objects()
    _saved_hooks.note_live(torch, objs)  # before any saved field is read (a checkpoint's, on torch <= 2.6)
    try:
        return list(itertools.compress(objs, map(_tensor_type_ids(torch).__contains__, map(id, map(type, objs)))))
    finally:
        objs.clear()


def _saved_tensors(node, names_by_type):
    """The tensors autograd node keeps for backward (its _saved_* fields,
    a custom Function's saved_tensors)."""
    kind = type(node)
    names = names_by_type.get(kind)
    if names is None:  # a custom Function's node (a compiled region's) keeps them in saved_tensors
        names = names_by_type[kind] = [n for n in dir(kind) if n.startswith("_saved_") or n == "saved_tensors"]
    for name in names:
        try:
            value = _saved_hooks.read(node, name)  # never through the program's unpack hooks (a checkpoint's)
        except Exception:  # freed after backward
            continue
        if type(value) in (tuple, list):
            for v in value:
                yield v
        else:
            yield value


def _name_of(kind):
    return type.__dict__["__name__"].__get__(kind, type(kind))


def _leaf_of(node):
    """The leaf an AccumulateGrad node keeps (a parameter the graph keeps
    alive after its model is gone), or None."""
    if _name_of(type(node)) != "AccumulateGrad":
        return None
    try:
        return node.variable
    except Exception:
        return None


def _graph_tensors(torch, grad_fn, seen_nodes, leaves):
    """(node, tensor) of the tensors saved in the graph under grad_fn, nodes
    not walked before; the leaves it keeps are appended to `leaves`."""
    base = torch.Tensor
    names = {}
    todo = [grad_fn]
    while todo and len(seen_nodes) < MAX_GRAPH_NODES:
        node = todo.pop()
        if node is None or id(node) in seen_nodes:
            continue
        seen_nodes[id(node)] = node
        leaf = _leaf_of(node)
        if leaf is not None:
            leaves.append(leaf)
        for v in _saved_tensors(node, names):
            if issubclass(type(v), base):
                yield node, v
        try:
            nexts = node.next_functions
        except Exception:
            continue
        for nxt, _ in nexts:
            if nxt is not None and id(nxt) not in seen_nodes:
                todo.append(nxt)


def _maker(saved):
    """The autograd node that produced a saved tensor, or None (a leaf, an input made without grad)."""
    try:
        return saved.grad_fn
    except Exception:
        return None


def build(torch, models, optimizers, param_paths, walk=True, created=None, keep_owners=False):
    """The Ledger of this moment.  models: live root modules; optimizers:
    torch optimizers; param_paths: id(param) -> its path in a live model;
    keep_owners: led.owner_of tells each storage's group."""
    led = Ledger(torch, created)
    if keep_owners:
        led.owner_of = {}
    live_params = {}
    for root in models:
        for path, p in root.named_parameters(remove_duplicate=False):
            live_params.setdefault(id(p), (p, module_group(path)))
        for path, b in root.named_buffers(remove_duplicate=False):
            led.add("parameter", module_group(path), b)
    for p, group in live_params.values():
        led.add("parameter", group, p)
    for p, group in live_params.values():
        g = p.grad
        if g is not None:
            led.add("gradient", group, g)
    names = _optimizer_names(optimizers)
    for opt in optimizers:
        name = names[id(opt)]
        for group in opt.param_groups:
            for p in group["params"]:
                if id(p) not in live_params:
                    led.add("stale", name, p, holder_class=type(opt).__name__)
                    if p.grad is not None:
                        led.add("stale", name, p.grad, holder_class=type(opt).__name__)
        for p, state in list(opt.state.items()):
            if type(state) is not dict:
                continue
            kind = "optimizer_state" if id(p) in live_params else "stale"
            for value in state.values():
                if issubclass(type(value), torch.Tensor):
                    led.add(kind, name, value, holder_class=type(opt).__name__)
    others = {}  # (device, data_ptr) -> [(tensor, storage)]: every tensor object of a storage
    for t in live_tensors(torch):
        where = led.storage_of(t)
        if where is not None and (where[0], where[1]) not in led.claimed:
            others.setdefault((where[0], where[1]), []).append((t, where))
    live_params.clear()
    targets = [t for pairs in others.values() for t, _ in pairs]
    paths = {}
    in_torch = {}  # {id(value): variable} of torch's own frames (Tensor.backward's `self`: the loss), read by the walk
    if walk and targets:
        own = {id(targets), id(others)}
        for pairs in others.values():  # the walk's caller's own containers refer to the tensors
            own.add(id(pairs))
            own.update(map(id, pairs))
        own.add(id(in_torch))
        paths = _parts.guard("holder_walk", lambda: _holders.find(targets, _unmeasured.DIR, own, in_torch), default={})
    for key, pairs in list(others.items()):
        # A storage is held through whichever of its tensor objects a root
        # reaches (an alias may be kept from C++ only): a path whose last step
        # is named (an index, an attribute) before one that ends in an unnamed
        # reference (a frame's temporary), then the shortest.
        named = [(paths[id(t)][0].endswith(">"), len(paths[id(t)][0]), i)
                 for i, (t, _) in enumerate(pairs) if id(t) in paths]
        others[key] = pairs[min(named)[2]] if named else pairs[0]
    graphs, seen_nodes = [], {}
    for t, where in others.values():
        found = paths.get(id(t))
        if found is not None:
            path, container, holder_class, _late = found
            led.add("held", container, t, holder_class=holder_class, path=path, storage=where)
        try:
            fn = t.grad_fn
        except Exception:
            fn = None
        if fn is not None:
            # a graph whose root only torch's own frame names (the loss Tensor.backward runs) is this step's
            step_own = found is not None and id(t) in in_torch and found[0].startswith(in_torch[id(t)] + " of a ")
            graphs.append((None if found is None or step_own else found[1], found is not None and found[3], fn))
    in_torch.clear()
    # graphs of named holders first, those held only through a frame's local
    # (this step's loss, also part of a running total's graph) after the others
    graphs.sort(key=lambda g: (g[0] is None, g[1]))
    leaves, saved_all = [], []
    for container, _late, fn in graphs:
        # a graph no named holder keeps (container None) is this step's
        saved_all.extend((container, node, saved) for node, saved in _graph_tensors(torch, fn, seen_nodes, leaves))
    # a saved tensor is the module's whose forward made it (_made_by.py): the node that produced it (its
    # grad_fn, kept by the saved variable; the saving node's own for its output) where known, else the
    # node that saved it
    makers = [(container, node, _maker(saved) or node, saved) for container, node, saved in saved_all]
    nodes = {id(n): n for _, _, n, _ in makers}
    nodes.update((id(n), n) for _, n, _, _ in makers)
    groups = {}
    if makers:
        modules = _made_by.Modules(models, led.storage_of)
        saved_names = {}
        groups = _made_by.groups(nodes, seen_nodes, modules, lambda n: _saved_tensors(n, saved_names),
                                 led.storage_of)
        modules.clear()
    nodes.clear()
    for container, node, maker, saved in makers:
        group = groups.get(id(maker)) or groups.get(id(node))
        if container is not None:  # the holder's row, told by module
            led.add("autograd", GRAPH_OF + container, saved, made_in=group)
        elif group is not None:
            led.add("autograd", SAVED_IN + group, saved)
        else:
            led.add("unattributed", None, saved)
    saved_all.clear()
    makers.clear()
    groups.clear()
    for leaf in leaves:  # a model's parameters a graph still keeps (the model is gone), and their grads
        led.add("parameter", "(kept by an autograd graph)", leaf)
        try:
            grad = leaf.grad
        except Exception:
            grad = None
        if grad is not None:
            led.add("gradient", "(kept by an autograd graph)", grad)
    leaves.clear()
    graphs.clear()
    seen_nodes.clear()
    for t, where in others.values():
        led.add("unattributed", None, t, storage=where)
    others.clear()
    targets.clear()
    paths.clear()
    return led


def record(rec, models, optimizers, param_paths=None, walk=True, created=None):
    """Writes the ledger's rows to the open audit of rec (rec.ledger(row))."""
    import torch
    write = getattr(rec, "ledger", None)
    if write is None:
        return 0
    with torch._C.DisableTorchFunctionSubclass():
        led = build(torch, models, optimizers, param_paths or {}, walk=walk, created=created,
                    keep_owners=owners_out is not None)
        if owners_out is not None:
            owners_out.owners.update(led.owner_of)
            owners_out.models = [weakref.ref(m) for m in models]
        devices = {d for d, _ in led.claimed}
        try:
            libraries = _workspaces.named(torch, led.claimed)
        except Exception:  # the workspaces are then left in unattributed, as before they were named
            libraries = {}
        rows = led.rows(_allocator.measured(devices | _allocator.current_devices()), libraries)
    for row in rows:
        write(row)
    return len(rows)
