"""What held the device's memory at the moment of a step's peak
(TPAUDIT_PEAK=backward, on a GPU; table peak_part, docs/schema.md).

An audit cannot be taken inside one operator, and the device's peak falls
inside backward, where gradients and the operators' temporaries are in
flight.  So at the probe's audit `backward` (_peak.py), whose ledger names
every allocated byte of that moment, the probe keeps each CUDA storage's
owner (kind and owner, _ledger.owners_out) and asks PyTorch's caching
allocator to record its history of allocations and frees with no stack
(torch.cuda.memory._record_memory_history(context=None)).  At the next
phase mark that is not backward (the optimizer's step pre-hook, zero_grad
or the next forward: _phases.py) or at exit it reads the history
(torch.cuda.memory._snapshot) and turns it off again, then replays it:

- the allocated bytes start at the blocks allocated at the audit and move by
  each `alloc` and `free_requested` (the counter torch.cuda's
  max_memory_allocated reads moves at the same two places), the reserved
  bytes by each segment_alloc and segment_free;
- the moment of the most allocated bytes is the window's peak; the blocks
  live then are told by owner: a block of the audit by the ledger's owner of
  its storage (none: unattributed); a block made after it by what it is
  when the window ends: a parameter's gradient (by module), else kept
  (`made_in_backward`), or, freed before the end, a `temporary`; and the
  reserved bytes not allocated then are the allocator's cache.

The rows (one `measured` row with the peak's allocated bytes, then the parts)
add up to that peak to the byte; the analyzer sets the largest of them beside
max_memory_allocated (analyzer/device_peak.c).  Nothing is done where the
program records the allocator's history itself (torch's
_cuda_isHistoryEnabled says so; a torch without it is left alone too), on
the CPU, or for a step whose window saw more than MAX_ENTRIES events (the
ring buffer would have dropped the oldest).  The history is a C++ ring
buffer in the allocator: no Python runs per allocation and dynamo sees none
of it.  Docs: PROBE.md, "The moment of the device's peak".
"""
import sys

from . import _allocator
from . import _ledger

PART = "phase_marks"  # the part that turns off with it (_parts.py)
MAX_ENTRIES = 200000  # allocator events one window keeps, at most (a step of GPT-2 124M makes a few thousand)
TEMPORARY = "temporary"  # a block made after the audit and freed before the window's end
MADE_IN_BACKWARD = "made_in_backward"  # made after the audit, alive at the end, no gradient
_COUNTING = ("alloc", "free_requested", "segment_alloc", "segment_free")


class PeakWindow:
    """One window at a time: begin() before the audit `backward`, opened()
    after it, end() at the next mark; record(step, device, parts) writes."""

    def __init__(self, recorder):
        self.rec = recorder
        self.open = None  # (step, device index, {addr: (kind, owner)} of the audit, trace length before)

    def begin(self):
        """Before the audit: the ledger keeps the owners of its storages."""
        if self.open is None and _history_free():
            _ledger.owners_out = _ledger.KeptOwners()

    def opened(self, step):
        """After the audit: the allocator's history starts (or nothing, when
        begin() did not ask the ledger)."""
        kept, _ledger.owners_out = _ledger.owners_out, None
        cuda = _allocator.cuda()
        if kept is None or cuda is None:
            return
        index = cuda.current_device()
        device = "cuda:%d" % index
        mine = {ptr: owner for (dev, ptr), owner in kept.owners.items() if dev == device}
        start = cuda.memory._snapshot()
        before = len(start["device_traces"][index]) if index < len(start["device_traces"]) else 0
        blocks = [(b["address"], b["size"]) for s in start["segments"] if s.get("device", index) == index
                  for b in s["blocks"] if b["state"] == "active_allocated"]
        reserved = sum(s["total_size"] for s in start["segments"] if s.get("device", index) == index)
        start.clear()
        cuda.memory._record_memory_history("all", context=None, stacks="python", max_entries=before + MAX_ENTRIES)
        self.open = (step, index, mine, before, blocks, reserved, kept.models)

    def close(self):
        """At exit: a window still open ends (the allocator's history is
        never left on, even with the part off)."""
        try:
            self.end()
        except Exception:
            pass

    def end(self):
        """Reads the window's history and turns it off; writes its peak."""
        if self.open is None:
            return
        step, index, owners, before, blocks, reserved, models = self.open
        self.open = None
        cuda = _allocator.cuda()
        try:
            snap = cuda.memory._snapshot()
        finally:
            cuda.memory._record_memory_history(None)
        traces = snap["device_traces"]
        trace = traces[index][before:] if index < len(traces) else []
        snap.clear()
        if len(trace) >= MAX_ENTRIES:
            return  # the ring may have dropped events: no peak told rather than a wrong one
        grads = _gradient_owners([m for m in (r() for r in models) if m is not None], "cuda:%d" % index)
        parts = compose(blocks, reserved, trace, owners, grads)
        for kind, owner, nbytes, count in parts:
            self.rec.peak_part(step, "cuda:%d" % index, kind, owner, nbytes, count)


def compose(blocks, reserved, trace, owners, grads):
    """The composition of the window's peak: [(owner kind, owner, bytes,
    blocks)], the `measured` row first (the peak's allocated bytes), then
    the parts by kind and owner, the most bytes first, the allocator's cache
    last.  blocks: [(address, size)] allocated at the start; reserved: the
    bytes reserved then; trace: the allocator's entries since (dicts with
    action, addr, size); owners: address -> (kind, owner) of the audit's
    storages; grads: address -> module of the gradients alive at the end."""
    live = dict(blocks)
    allocated = top = sum(live.values())
    held, top_at, top_reserved = reserved, -1, reserved
    events = [e for e in trace if e.get("action") in _COUNTING]
    for i, e in enumerate(events):
        action, size = e["action"], int(e["size"])
        if action == "alloc":
            allocated += size
        elif action == "free_requested":
            allocated -= size
        elif action == "segment_alloc":
            held += size
        else:
            held -= size
        if allocated > top:
            top, top_at, top_reserved = allocated, i, held
    # the blocks live at the peak, and which of those made since are alive at the end
    at_top, made = dict(blocks), set()
    for e in events[:top_at + 1]:
        if e["action"] == "alloc":
            at_top[e["addr"]] = int(e["size"])
            made.add(e["addr"])
        elif e["action"] == "free_requested":
            at_top.pop(e["addr"], None)
            made.discard(e["addr"])
    alive_at_end = set(made)
    for e in events[top_at + 1:]:
        if e["action"] == "free_requested":
            alive_at_end.discard(e["addr"])
        elif e["action"] == "alloc":
            alive_at_end.discard(e["addr"])  # a later block at the same address is another
    sums = {}
    for addr, size in at_top.items():
        if addr not in made:
            key = owners.get(addr, ("unattributed", None))
        elif addr not in alive_at_end:
            key = (TEMPORARY, None)
        elif addr in grads:
            key = ("gradient", grads[addr])
        else:
            key = (MADE_IN_BACKWARD, None)
        part = sums.setdefault(key, [0, 0])
        part[0] += size
        part[1] += 1
    rows = [("measured", "replayed allocator history", top, len(at_top))]
    rows += [(k, o, b, n) for (k, o), (b, n) in sorted(sums.items(), key=lambda s: (-s[1][0], s[0][0], s[0][1] or ""))]
    if top_reserved > top:
        rows.append(("allocator_cache", None, top_reserved - top, 0))
    return rows


def _gradient_owners(models, device):
    """address -> module group of each live parameter's gradient on device."""
    out = {}
    for root in models:
        for path, p in root.named_parameters():
            g = p.grad
            if g is not None and str(g.device) == device:
                out.setdefault(g.untyped_storage().data_ptr(), _ledger.module_group(path))
    return out


def _history_free():
    """True when CUDA is up and no one records the allocator's history."""
    cuda = _allocator.cuda()
    torch = sys.modules.get("torch")
    enabled = getattr(getattr(torch, "_C", None), "_cuda_isHistoryEnabled", None)
    if cuda is None or enabled is None or not hasattr(cuda.memory, "_snapshot"):
        return False
    return not enabled()

