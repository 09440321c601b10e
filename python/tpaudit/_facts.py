"""Fact collection at an audit point: who holds which tensor.

collect() walks models and optimizers and reports every tensor once plus
every holder -> tensor reference to a recorder (NativeRecorder or a test
double).  It reads only; it never changes a tensor or draws random numbers.
"""
import sys

from . import _forward
from . import _native as N
from . import _parts
from . import _track
from . import frameworks
from .frameworks import fsdp2, holders

WRAPPER_ATTRS = ("optim", "optimizer", "_optimizer")


def _dtensor_type():
    """DTensor's class: torch.distributed.tensor (2.4+; 2.1-2.3 have the
    package without it) or torch.distributed._tensor (2.1-2.3)."""
    for name in ("torch.distributed.tensor", "torch.distributed._tensor"):
        found = getattr(sys.modules.get(name), "DTensor", None)
        if found is not None:
            return found
    return None


def _storage_of(t):
    """(data pointer, bytes) of t's storage, or for a wrapper tensor subclass
    that has none of its own (torchao's WeightWithDynamicFloat8CastTensor)
    of the one tensor it wraps (__tensor_flatten__), so bytes are counted
    where they live; None when there is none to read."""
    if _track.is_fake(t):
        return None
    try:
        storage = t.untyped_storage()
        return storage.data_ptr(), storage.nbytes()
    except RuntimeError:
        pass
    flatten = getattr(t, "__tensor_flatten__", None)
    if flatten is None:
        return None
    try:
        names = flatten()[0]
        if len(names) == 1:
            return _storage_of(getattr(t, names[0]))
    except Exception:
        pass
    return None


class _Describer:
    """Per-audit cache of what is the same for many tensors: the torch types
    and the dtype and device strings."""

    def __init__(self):
        import torch
        self.parameter = torch.nn.Parameter
        self.tensor = torch.Tensor
        self.dtensor = _dtensor_type()
        self.dtypes = {}
        self.devices = {}

    def facts(self, t, name):
        """Facts of one tensor for recorder.tensor(), keyed by the fields of
        include/tpaudit.h's tpaudit_tensor_t."""
        kind = type(t)
        is_dt = self.dtensor is not None and (kind is self.dtensor or isinstance(t, self.dtensor))
        local = t.to_local() if is_dt else t
        device = local.device
        storage_ptr = storage_bytes = 0
        if device.type != "meta":
            storage_ptr, storage_bytes = _storage_of(local) or (0, 0)
        if is_dt:
            type_name = "DTensor"
        elif kind is self.parameter or kind is self.tensor:
            type_name = "Parameter" if kind is self.parameter else "Tensor"
        else:  # a tensor subclass (a Parameter of one too): its own class
            type_name = kind.__name__
        dtype = t.dtype
        dtype_text = self.dtypes.get(dtype)
        if dtype_text is None:
            dtype_text = self.dtypes[dtype] = str(dtype).replace("torch.", "")
        where = t.device if is_dt else device
        device_text = self.devices.get(where)
        if device_text is None:
            device_text = self.devices[where] = str(where)
        shape = list(t.shape)
        return {"key": id(t), "name": name, "shape": shape, "local_shape": list(local.shape) if is_dt else shape,
                "dtype": dtype_text, "device": device_text, "storage_ptr": storage_ptr,
                "storage_bytes": storage_bytes, "nbytes": local.numel() * local.element_size(),
                "requires_grad": t.requires_grad, "has_grad": t.grad is not None, "type": type_name,
                "storage_offset": local.storage_offset()}


def _owner(t):
    link = _track.owners.get(t)
    return link[0]() if link else None


def _seen_modules():
    """Modules that ran forward in an eager call (_forward.py's twin), and
    those in the callers' locals and __main__'s globals (a compiled
    function's models, whose calls only its graph makes); an error here
    turns the part forward_descriptor off (the optimizers' params remain)."""
    import torch
    Module = torch.nn.Module
    found = _forward.noted() + _forward.from_frames(sys._getframe(2), Module)
    main = sys.modules.get("__main__")
    if main is not None:
        found.extend(v for v in list(vars(main).values()) if isinstance(v, Module))
    return found


def find_models(extra_modules=(), tensors=()):
    """Live roots: modules that ran forward or that the callers' frames and
    __main__ hold, owners of optimizer params, owners of `tensors` (a
    wrapper's working tensors), extra_modules.

    A candidate is lifted to its root through recorded parent links (a dead
    parent, such as a DDP or torch.compile wrapper that was let go, ends the
    climb: the module is a root); one replaced out of a live parent is
    dropped; a root contained in another root is dropped."""
    tops = {}
    candidates = list(extra_modules)
    if _parts.on("forward_descriptor"):
        candidates += _parts.guard("forward_descriptor", _seen_modules) or []
    held = [p for opt, _ in _track.optimizers.live() for group in opt.param_groups for p in group["params"]]
    for t in held + list(tensors):
        module = _owner(t)
        if module is not None:
            candidates.append(module)
    for module in candidates:
        top = _track.module_top(_track.compiled_from(module) or module)
        if top is not None:
            tops[id(top)] = top
    inside = set()
    for top in tops.values():
        for sub in top.modules():
            if sub is not top:
                inside.add(id(sub))
    return [m for k, m in tops.items() if k not in inside]


def unwrap(obj):
    """[(object, is_torch_optimizer)] from a wrapper down its .optim chain."""
    chain, seen = [], set()
    while obj is not None and id(obj) not in seen:
        seen.add(id(obj))
        chain.append(obj)
        nxt = None
        for attr in WRAPPER_ATTRS:
            cand = getattr(obj, attr, None)
            if cand is not None and cand is not obj and (hasattr(cand, "param_groups") or any(hasattr(cand, a) for a in WRAPPER_ATTRS)):
                nxt = cand
                break
        obj = nxt
    return chain


def wrappers_of(optimizers):
    """Every object above or below the torch optimizers that may hold
    masters: each optimizer's .optim chain, the holders found above it, and
    the parts framework tables name below those, each once."""
    out, seen = [], set()
    todo = []
    for opt in optimizers:
        todo.extend(unwrap(opt))
        todo.extend(_track.holders_of(opt))
    while todo:
        obj = todo.pop(0)
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        out.append(obj)
        for child in frameworks.children(obj):
            todo.extend(unwrap(child))
    return out


def discover_above(optimizers, live_ids):
    """Once per optimizer, and only when it holds a tensor that is not a live
    model parameter (so a wrapper may hold its masters' working tensors), a
    gc referrer scan for the objects above it (frameworks/holders.py)."""
    for opt in optimizers:
        if not hasattr(opt, "param_groups") or _track.scanned.get(opt):
            continue
        if all(id(p) in live_ids for g in opt.param_groups for p in g["params"]):
            continue
        _track.scanned.put(opt, True)
        found = _parts.guard("wrapper_discovery", holders.from_referrers, opt, _track.holders_of(opt), default=())
        _track.remember_holders(opt, found)


class _Audit:
    def __init__(self, rec):
        self.rec = rec
        self.seen = {}
        self.paths = {}  # id(param) -> its path in a live model, this audit
        self.labels = {}  # id(master) -> a name from its working tensor or wrapper slot
        self.describe = _Describer()

    def tensor(self, t, name=None):
        if id(t) in self.seen:
            return
        if name is None:
            name = self.name_of(t)
        self.seen[id(t)] = t
        self.rec.tensor(self.describe.facts(t, name))

    def name_of(self, t):
        path = self.paths.get(id(t))
        if path is None:
            path = _track.param_name(t)
        return path if path is not None else self.labels.get(id(t))

    def model(self, root):
        cls, hid = type(root).__name__, id(root)
        ref, paths = self.rec.ref, self.paths
        for path, p in root.named_parameters(remove_duplicate=False):
            _track.remember_name(p, path)
            paths.setdefault(id(p), path)
            self.tensor(p, path)
            ref(N.HOLDER_MODULE, cls, hid, path, N.ROLE_PARAM, id(p))
        for held, twin in _parts.guard(fsdp2.PART, lambda: list(fsdp2.live_twins(root)), default=()):
            path = paths.get(id(held))
            self.tensor(twin, path)
            ref(N.HOLDER_MODULE, cls, hid, path, N.ROLE_PARAM, id(twin))
            ref(N.HOLDER_WRAPPER, "FSDPParam", id(twin), path, N.ROLE_MAP_ENTRY, id(held), id(twin))

    def optimizer(self, opt):
        import torch
        Tensor = torch.Tensor
        cls, hid = type(opt).__name__, id(opt)
        ref = self.rec.ref
        for i, group in enumerate(opt.param_groups):
            for j, p in enumerate(group["params"]):
                self.tensor(p)
                ref(N.HOLDER_OPTIMIZER, cls, hid, "param_groups[%d].params[%d]" % (i, j),
                    N.ROLE_GROUP_PARAM, id(p))
        for p, state in list(opt.state.items()):
            if not isinstance(state, dict):
                continue
            is_tensor = isinstance(p, Tensor)
            if is_tensor:
                self.tensor(p)
            label = self.name_of(p) if is_tensor else str(p)
            for field, value in state.items():
                if isinstance(value, Tensor):
                    self.tensor(value, "%s.%s" % (label, field) if label else None)
                    ref(N.HOLDER_OPTIMIZER, cls, hid, "state[%s].%s" % (label, field),
                        N.ROLE_STATE, id(value), id(p) if is_tensor else 0)

    def wrapper_pairs(self, wrappers, group_ids):
        """(wrapper, label, working, master) of every wrapper, masters named."""
        import torch
        Tensor = torch.Tensor

        def is_tensor(t):
            return isinstance(t, Tensor)

        def was_param(t):
            return _track.owners.get(t) is not None or id(t) in self.paths

        found = []
        for obj in wrappers:
            if not hasattr(obj, "__dict__"):
                continue
            for label, working, master, flat in frameworks.pairs(obj, group_ids, is_tensor, was_param):
                found.append((obj, label, working, master))
                if id(master) not in self.labels and self.name_of(master) is None:
                    wname = None if flat else self.name_of(working)
                    self.labels[id(master)] = (wname + " (master)") if wname else \
                        "%s.%s" % (type(obj).__name__, label.split("->")[-1])
        return found

    def map_entries(self, found):
        for obj, label, working, master in found:
            self.tensor(working)
            self.tensor(master)
            self.rec.ref(N.HOLDER_WRAPPER, type(obj).__name__, id(obj), label,
                         N.ROLE_MAP_ENTRY, id(working), id(master))


def collect(rec, label, step, models=None, optimizers=None, ledger=None):
    """One audit: begin, every model, every optimizer chain, the wrappers'
    master/working pairs, ledger(rec, models, torch optimizers) when given
    (the memory ledger, _ledger.py), end.  Returns the audit id."""
    if optimizers is None:
        optimizers = [o for o, _ in _track.optimizers.live()]
    explicit_models = models is not None
    if models is None:
        models = find_models()
    audit_id = rec.begin(label, step)
    work = _Audit(rec)
    try:
        for root in models:
            work.model(root)
        discover_above(optimizers, work.paths)
        wrappers = wrappers_of(optimizers)
        torch_opts, group_ids = [], set()
        below = [o for top in optimizers for o in unwrap(top)]
        tracked = [w for w in wrappers if _track.optimizers.get(w, False) is None]
        for obj in below + tracked:
            if hasattr(obj, "param_groups") and all(obj is not o for o in torch_opts):
                torch_opts.append(obj)
        for opt in torch_opts:
            for g in opt.param_groups:
                group_ids.update(id(p) for p in g["params"])
        found = work.wrapper_pairs(wrappers, group_ids)
        unseen = [w for _, _, w, _ in found if id(w) not in work.paths]
        if unseen and not explicit_models:
            # A wrapper's step before any forward (DeepSpeed's dummy step in
            # its constructor): its optimizer holds masters no module owns,
            # so the model is found through the working tensors' owners.
            modelled = {id(m) for m in models}
            for root in find_models(tensors=unseen):
                if id(root) not in modelled:
                    work.model(root)
        done = set()
        for opt in torch_opts:
            if id(opt) not in done:
                done.add(id(opt))
                work.optimizer(opt)
        work.map_entries(found)
        if ledger is not None:
            work.seen.clear()
            ledger(rec, models, torch_opts)
    finally:
        work.seen.clear()
        rec.end(audit_id)
    return audit_id
