"""Which module's forward made each node of a step's autograd graph, told
from the graph alone at an audit (the ledger's rows 'saved for backward in
<module>'): nothing runs on the forward path, so the probe costs nothing
between audits and dynamo sees nothing of it.

A node that uses a parameter (one of its inputs is a parameter or a view or
cast of one, or it saved a parameter's storage), or that merely views or
casts the output of such a node, was made by the deepest module owning that
parameter ('transformer.h.3.attn.c_attn'), or holding all the parameters it
uses (a compiled region's node: the module compiled); a parameter several
modules share
(tied embeddings) is the module's whose class the node names
(EmbeddingBackward0: the Embedding), else the last registered one's.
A node that uses none (an activation function, attention's products, a
norm's arithmetic before its weight) ran between the nearest node under it
that uses one (module A, what it consumed) and the nearest above it (module
B, what consumed it): it was made by the deepest module holding both, A's
parent when nothing above uses a parameter, B's when nothing under does.
Where that module is, or holds on the nearer side (A on a tie) as a child,
a container that runs nothing itself (ModuleList, ModuleDict, Sequential),
it is the container's child on that side, the block; the nearer of A and B
is the one autograd made the fewest nodes apart from the node in forward
(their sequence numbers).  So a residual add at a block's end stays in its
block (the last block's too, before the final norm), and a norm's
arithmetic before its weight goes with the block the norm is in.
Docs: PROBE.md.
"""
import collections

from . import _parts as probe_parts
from .frameworks import fsdp2

PASS_STEPS = 4         # views and casts followed from a node to the parameter it uses (mm <- t <- AccumulateGrad)
MAX_SEARCHED = 4096    # nodes one search for the nearest anchored node visits, at most
CONTAINERS = frozenset(("ModuleList", "ModuleDict", "Sequential", "ParameterList", "ParameterDict"))


def _name_of(kind):
    return type.__dict__["__name__"].__get__(kind, type(kind))


def _nexts(node):
    try:
        return [n for n, _ in node.next_functions if n is not None]
    except Exception:
        return []


class Modules:
    """The live models' modules: by parameter and by parameter storage the
    deepest modules owning them, (path, class name) each; the containers."""

    def __init__(self, models, storage_of):
        self.by_param, self.by_storage, self.containers, self.root_name = {}, {}, set(), None
        for root in models:
            if self.root_name is None:
                self.root_name = _name_of(type(root))
            for path, module in root.named_modules(remove_duplicate=False):
                kind = _name_of(type(module))
                if kind in CONTAINERS:
                    self.containers.add(path)
                for _name, p in module.named_parameters(recurse=False):
                    owner = (path, kind)
                    self.by_param.setdefault(id(p), [])
                    if owner not in self.by_param[id(p)]:
                        self.by_param[id(p)].append(owner)
                    where = storage_of(p)
                    if where is not None:
                        self.by_storage.setdefault(where[1], self.by_param[id(p)])
            self._add_unsharded(root)

    def _add_unsharded(self, root):
        """FSDP2's unsharded parameters (the ones a forward used, while the
        module may hold its shard at the audit), owned as the module's."""
        paths = {id(module): path for path, module in root.named_modules(remove_duplicate=False)}
        found = probe_parts.guard(fsdp2.PART, lambda: list(fsdp2.unsharded(root)), default=())
        for p, module in found:
            if id(module) in paths:
                self.by_param.setdefault(id(p), [(paths[id(module)], _name_of(type(module)))])

    def label(self, path):
        """The row's name of a module path; the root's is its class."""
        return path or self.root_name or ""

    def clear(self):
        self.by_param.clear()
        self.by_storage.clear()


def _pick(owners, node):
    """The owner of a parameter that node used: of a parameter several
    modules share (tied embeddings), the one whose class the node's names
    (EmbeddingBackward0 -> the Embedding), else the last registered."""
    if len(owners) > 1:
        node_kind = _name_of(type(node))
        for path, kind in owners:
            if kind in node_kind:
                return path
    return owners[-1][0]


def _pass_through(node, saved_of):
    """The one input of a node that keeps no tensor (a view, a transpose, a
    cast, a copy), else None."""
    nexts = _nexts(node)
    if len(nexts) != 1 or any(hasattr(v, "untyped_storage") for v in saved_of(node)):
        return None
    return nexts[0]


def _parameter_owners(node, modules):
    """The modules owning the parameter an AccumulateGrad node is for, or None."""
    if _name_of(type(node)) != "AccumulateGrad":
        return None
    try:
        return modules.by_param.get(id(node.variable))
    except Exception:
        return None


def _deepest_common(paths):
    """The deepest module holding every one of paths."""
    common = _parts(paths[0])
    for path in paths[1:]:
        parts = _parts(path)
        n = 0
        while n < len(common) and n < len(parts) and common[n] == parts[n]:
            n += 1
        common = common[:n]
    return ".".join(common)


def _anchor(node, modules, saved_of, storage_of):
    """The deepest module whose parameters node uses, or None: node, or the
    node under it that it merely views or casts, takes parameters (or views
    or casts of them) as inputs, or saved a parameter's storage; of
    parameters of several modules (a compiled region's), the deepest module
    holding them all."""
    n = node
    for _ in range(PASS_STEPS):
        found = []
        for v in saved_of(n):
            where = storage_of(v) if hasattr(v, "untyped_storage") else None
            if where is not None and where[1] in modules.by_storage:
                found.append(_pick(modules.by_storage[where[1]], n))
        for given in _nexts(n):
            for _ in range(PASS_STEPS):
                owners = _parameter_owners(given, modules)
                if owners:
                    found.append(_pick(owners, n))
                    break
                given = _pass_through(given, saved_of)
                if given is None:
                    break
        if found:
            return _deepest_common(found)
        n = _pass_through(n, saved_of)
        if n is None:
            return None
    return None


def _order(node):
    """The node's place in the order autograd made the nodes (its sequence
    number), or None."""
    try:
        return node._sequence_nr()
    except Exception:
        return None


def _nearest(node, neighbours, anchor_of, barren):
    """(module, distance) of the nearest node from node, along neighbours,
    that uses a parameter (the fewest steps; of those, the fewest nodes
    autograd made between them in forward, told by their sequence
    numbers); the distance is that count, else the steps; (None, None)
    when none within MAX_SEARCHED.  barren: ids of nodes from which a
    whole search along neighbours found none (skipped, then grown)."""
    here = _order(node)
    todo, seen, best, best_steps = collections.deque([(node, 0)]), set(), None, None
    while todo and len(seen) < MAX_SEARCHED:
        n, steps = todo.popleft()
        if best is not None and steps > best_steps:
            break
        if id(n) in seen or id(n) in barren:
            continue
        seen.add(id(n))
        if n is not node:
            found = anchor_of(n)
            if found is not None:
                there = _order(n)
                distance = abs(here - there) if here is not None and there is not None else steps
                if best is None or distance < best[1]:
                    best, best_steps = (found, distance), steps
                continue
        todo.extend((nxt, steps + 1) for nxt in neighbours(n))
    if best is None and not todo:  # searched all it reaches: nothing under any of them either
        barren.update(seen)
    return best or (None, None)


def _parts(path):
    return path.split(".") if path else []


def _enclosing(below, below_distance, above, above_distance, containers):
    """The module that ran a node between modules below and above it."""
    if below is None and above is None:
        return None
    if above is None:
        parts, side = _parts(below)[:-1], _parts(below)
    elif below is None:
        parts, side = _parts(above)[:-1], _parts(above)
    else:
        a, b = _parts(below), _parts(above)
        n = 0
        while n < len(a) and n < len(b) and a[n] == b[n]:
            n += 1
        parts, side = a[:n], (a if below_distance <= above_distance else b)
    # a container runs nothing itself: the node ran in its block on the nearer side
    while len(side) > len(parts) and (".".join(parts) in containers or ".".join(side[:len(parts) + 1]) in containers):
        parts = side[:len(parts) + 1]
    return ".".join(parts)


def groups(nodes, walked, modules, saved_of, storage_of):
    """{id(node): the name of the module whose forward made it} for the
    nodes of `nodes` (id -> node); walked: id -> every node of the graphs
    walked (their consumers are looked up among them).  Nodes whose graph
    reaches no parameter have none."""
    anchors = {}

    def anchor_of(n):
        key = id(n)
        if key not in anchors:
            anchors[key] = _anchor(n, modules, saved_of, storage_of)
        return anchors[key]

    consumers = None
    made, barren_below, barren_above = {}, set(), set()
    for key, node in nodes.items():
        module = anchor_of(node)
        if module is None:
            if consumers is None:
                consumers = collections.defaultdict(list)
                for n in walked.values():
                    for nxt in _nexts(n):
                        consumers[id(nxt)].append(n)
            below, below_distance = _nearest(node, _nexts, anchor_of, barren_below)
            above, above_distance = _nearest(node, lambda n: consumers.get(id(n), ()), anchor_of, barren_above)
            module = _enclosing(below, below_distance, above, above_distance, modules.containers)
        if module is not None:
            made[key] = modules.label(module)
    anchors.clear()
    barren_below.clear()
    barren_above.clear()
    if consumers is not None:
        consumers.clear()
    return made
