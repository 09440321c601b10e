"""The rule for wrappers no framework table knows.

Two shapes are read on any object found holding a torch optimizer:

- tensor-keyed dicts (tensor -> tensor): the side found in the inner
  optimizer's param groups is the master, the other the working tensor;
  when neither side is (a seeded bug can leave both stale), a dict whose
  name starts with "master" is keyed by the master.
- parallel lists: attribute W (a list of groups of tensors) and attribute M
  of the same length, where every tensor of M is a param of the inner
  optimizer and every tensor of W is not, but was registered as a module
  parameter at some time.  W[i][j] pairs with M[i][j] when both groups have
  the same length and each pair has the same number of elements or M's is
  smaller (a shard); W[i] pairs with a flat M[i] when M[i] is one tensor of
  at most the group's elements.  A W that two different Ms would fit is
  left alone (never guessed).

What it cannot see (docs/FRAMEWORKS.md): masters kept in a structure of
another shape, or a wrapper the probe never finds holding the optimizer.
"""


def tensor_maps(wrapper, group_ids, is_tensor):
    for attr, value in list(vars(wrapper).items()):
        if not isinstance(value, dict) or not value:
            continue
        items = list(value.items())
        if not all(is_tensor(k) and is_tensor(v) for k, v in items):
            continue
        key_is_master = attr.startswith("master")
        for i, (k, v) in enumerate(items):
            if id(k) in group_ids:
                master, working = k, v
            elif id(v) in group_ids:
                master, working = v, k
            else:
                master, working = (k, v) if key_is_master else (v, k)
            yield "%s[%d]" % (attr, i), working, master, False


def _groups(value, is_tensor):
    """value as a list of groups (each a list of tensors or one tensor), else None."""
    if not isinstance(value, (list, tuple)) or not value:
        return None
    out = []
    for g in value:
        if is_tensor(g):
            out.append(g)
        elif isinstance(g, (list, tuple)) and all(is_tensor(t) for t in g):
            out.append(list(g))
        else:
            return None
    return out


def _flat(groups):
    for g in groups:
        if isinstance(g, list):
            yield from g
        else:
            yield g


def _fits(ws, ms):
    for w, m in zip(ws, ms):
        if isinstance(w, list) and isinstance(m, list):
            if len(w) != len(m) or any(b.numel() > a.numel() for a, b in zip(w, m)):
                return False
        elif isinstance(w, list):
            if m.numel() > sum(t.numel() for t in w):
                return False
        else:
            return False
    return True


def parallel_lists(wrapper, group_ids, is_tensor, was_param):
    masters, workings = {}, {}
    for attr, value in list(vars(wrapper).items()):
        groups = _groups(value, is_tensor)
        if groups is None:
            continue
        tensors = list(_flat(groups))
        if not tensors:
            continue
        if all(id(t) in group_ids for t in tensors):
            masters[attr] = groups
        elif not any(id(t) in group_ids for t in tensors) and all(was_param(t) for t in tensors) \
                and all(isinstance(g, list) for g in groups):
            workings[attr] = groups
    for w_attr, ws in workings.items():
        fits = [m_attr for m_attr, ms in masters.items() if len(ms) == len(ws) and _fits(ws, ms)]
        if len(fits) != 1:
            continue
        m_attr = fits[0]
        for i, (wg, mg) in enumerate(zip(ws, masters[m_attr])):
            for j, w in enumerate(wg):
                if isinstance(mg, list):
                    yield "%s[%d][%d]->%s[%d][%d]" % (w_attr, i, j, m_attr, i, j), w, mg[j], False
                else:
                    yield "%s[%d][%d]->%s[%d]" % (w_attr, i, j, m_attr, i), w, mg, True
