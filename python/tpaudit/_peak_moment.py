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
  reserved bytes not allocated then are the allocator's cache.  A
  temporary or a kept block is named by the module whose backward made it:
  the phase marks inside the window (_phases.py, backward module by
  module) give their time in microseconds of unix time, as the history's
  `time_us` does (c10's approximate clock, converted to unix time when the
  snapshot is read), and a block belongs to the last mark before it was
  made (none where the history has no times).

The rows (one `measured` row with the peak's allocated bytes, then the parts)
add up to that peak to the byte; the analyzer sets the largest of them beside
max_memory_allocated (analyzer/device_peak.c).  Nothing is done where the
program records the allocator's history itself (torch's
_cuda_isHistoryEnabled says so; a torch without it is left alone too), on
the CPU, where the process recorded a history before (its entries stay as
they are), for a step whose window saw MAX_ENTRIES events or more (the ring
buffer would have dropped the oldest), or once the windows before left
MAX_ENTRIES entries (where the allocator keeps the history after it is
turned off, each window reads from where the last one ended; on the H100,
torch 2.11's second window found fewer entries than the first left, as where
turning it off clears them).  The history is a C++ ring
buffer in the allocator: no Python runs per allocation and dynamo sees none
of it.  Docs: PROBE.md, "The moment of the device's peak".
"""
import bisect
import sys
import time

from . import _allocator
from . import _ledger
from . import _workspaces
from ._phases import PART  # the part it belongs to: it turns off with the phase marks (_parts.py)

MAX_ENTRIES = 200000  # allocator events one window keeps, at most (a step of GPT-2 124M makes a few thousand)
MAX_MARKS = 65536  # backward marks one window keeps (one per marked module, and a recomputed module's twice)
TEMPORARY = "temporary"  # a block made after the audit and freed before the window's end
MADE_IN_BACKWARD = "made_in_backward"  # made after the audit, alive at the end, no gradient
_COUNTING = ("alloc", "free_requested", "segment_alloc", "segment_free")
_UNIT = 512  # the caching allocator's block unit


class PeakWindow:
    """One window at a time: begin() before the audit `backward`, opened()
    after it, end() at the next mark (it writes the window's rows through
    the recorder's peak_part), close() at exit."""

    def __init__(self, recorder):
        self.rec = recorder
        self.open = None  # (step, device index, {addr: (kind, owner)}, the device's history length, [(addr, size)]
        #                   and reserved bytes of the audit, weak references to its models)
        self.left = 0  # entries the windows before left in the allocator's history
        self.marks = ([], [])  # the open window's backward marks: their times (unix us) and owners

    def marked(self, owner):
        """A backward mark while the window is open (_phases.PhaseMarks)."""
        times, owners = self.marks
        if self.open is not None and len(times) < MAX_MARKS:
            times.append(time.time_ns() // 1000)
            owners.append(owner)

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
        traces = start["device_traces"]
        total = sum(len(t) for t in traces)
        # a window opens on an empty history or on no more than the last window left (one more entry: a snapshot
        # taken while recording is one; fewer where turning it off cleared them: on the H100, torch 2.11's second
        # window found fewer than the first left), so a history the program recorded stays as it is; the earlier
        # windows' entries stay bounded
        ours = total == 0 or (self.left and total <= self.left + 1)
        if not ours or self.left >= MAX_ENTRIES:
            return
        before = len(traces[index]) if index < len(traces) else 0
        active = _active_blocks(start["segments"], index)
        reserved = sum(s["total_size"] for s in start["segments"] if s.get("device", index) == index)
        start.clear()
        workspaces = _workspaces.sizes_of(cuda.get_device_capability(index)[0])  # blocks no storage starts
        for addr, (_size, requested) in active.items():
            if addr not in mine and requested in workspaces:
                mine[addr] = workspaces[requested]
        blocks = [(addr, size) for addr, (size, _requested) in active.items()]
        cuda.memory._record_memory_history("all", context=None, stacks="python", max_entries=total + MAX_ENTRIES)
        self.open = (step, index, mine, before, blocks, reserved, kept.models)
        self.marks = ([], [])

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
        self.left = sum(len(t) for t in traces)  # what stays where the allocator keeps them after the history is off
        end_sizes = {addr: size for addr, (size, _requested) in _active_blocks(snap["segments"], index).items()}
        snap.clear()
        if len(trace) >= MAX_ENTRIES:
            return  # the ring may have dropped events: no peak told rather than a wrong one
        grads = _gradient_owners([m for m in (r() for r in models) if m is not None], "cuda:%d" % index)
        marks, self.marks = self.marks, ([], [])
        parts = compose(blocks, reserved, trace, owners, grads, end_sizes, marks)
        for kind, owner, nbytes, count in parts:
            self.rec.peak_part(step, "cuda:%d" % index, kind, owner, nbytes, count)


def compose(blocks, reserved, trace, owners, grads, end_sizes=None, marks=None):
    """The composition of the window's peak: [(owner kind, owner, bytes,
    blocks)], the `measured` row first (the peak's allocated bytes), then
    the parts by kind and owner, the most bytes first, the allocator's cache
    last.  blocks: [(address, block size)] allocated at the start; reserved:
    the bytes reserved then; trace: the allocator's entries since (dicts
    with action, addr, size: the size asked for, not the block's); owners:
    address -> (kind, owner) of the start's blocks; grads: address -> module
    of the gradients alive at the end; end_sizes: address -> block size of
    the blocks allocated at the end; marks: ([time_us], [module]) of the
    backward marks, in order.  A block is counted at its block size
    where a snapshot gave it (the start's, and those alive at the end), else
    at its request rounded up to the allocator's 512-byte unit (a cached
    block handed out unsplit is larger by what it kept: the replay's peak
    can be under max_memory_allocated by that much); a free takes off what
    its block's allocation counted."""
    end_sizes = end_sizes or {}
    events = [e for e in trace if e.get("action") in _COUNTING]
    last_alloc, last_free = {}, {}
    for i, e in enumerate(events):
        if e["action"] == "alloc":
            last_alloc[e["addr"]] = i
        elif e["action"] == "free_requested":
            last_free[e["addr"]] = i

    def kept(addr, i):
        """True when event i made the block alive at the window's end."""
        return last_alloc.get(addr) == i and last_free.get(addr, -1) < i
    live = dict(blocks)
    allocated = top = sum(live.values())
    held, top_at, top_reserved = reserved, -1, reserved
    counted = []  # the bytes each event moved
    for i, e in enumerate(events):
        action, addr = e["action"], e["addr"]
        if action == "alloc":
            size = end_sizes[addr] if addr in end_sizes and kept(addr, i) else _unit(int(e["size"]))
            live[addr] = size
            allocated += size
        elif action == "free_requested":
            size = live.pop(addr, _unit(int(e["size"])))
            allocated -= size
        else:
            size = int(e["size"])
            held += size if action == "segment_alloc" else -size
        counted.append(size)
        if allocated > top:
            top, top_at, top_reserved = allocated, i, held
    at_top, made_at = dict(blocks), {}  # the blocks live at the peak; address -> the event that made one since
    for i in range(top_at + 1):
        action, addr = events[i]["action"], events[i]["addr"]
        if action == "alloc":
            at_top[addr], made_at[addr] = counted[i], i
        elif action == "free_requested":
            at_top.pop(addr, None)
            made_at.pop(addr, None)
    sums = {}
    for addr, size in at_top.items():
        if addr not in made_at:
            key = owners.get(addr, ("unattributed", None))
        elif not kept(addr, made_at[addr]):
            key = (TEMPORARY, _made_in(events[made_at[addr]], marks))
        elif addr in grads:
            key = ("gradient", grads[addr])
        else:
            key = (MADE_IN_BACKWARD, _made_in(events[made_at[addr]], marks))
        part = sums.setdefault(key, [0, 0])
        part[0] += size
        part[1] += 1
    rows = [("measured", "replayed allocator history", top, len(at_top))]
    rows += [(k, o, b, n) for (k, o), (b, n) in sorted(sums.items(), key=lambda s: (-s[1][0], s[0][0], s[0][1] or ""))]
    if top_reserved > top:
        rows.append(("allocator_cache", None, top_reserved - top, 0))
    return rows


def _made_in(event, marks):
    """The module of the last backward mark before the event, or None."""
    when = event.get("time_us")
    if not marks or when is None:
        return None
    times, owners = marks
    at = bisect.bisect_right(times, when)
    return owners[at - 1] if at else None


def _unit(requested):
    """A request's bytes as the allocator counts them at least: whole 512-byte units."""
    return max(_UNIT, -(-requested // _UNIT) * _UNIT)


def _active_blocks(segments, index):
    """address -> (block size, requested size) of the allocated blocks of a
    snapshot's segments on device `index`."""
    return {b["address"]: (b["size"], b.get("requested_size", b["size"])) for s in segments
            if s.get("device", index) == index for b in s["blocks"] if b["state"] == "active_allocated"}


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

