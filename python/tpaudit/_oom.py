"""The out-of-memory watch of the probe: who filled the GPU when PyTorch's
caching allocator runs out.

The allocator calls its out-of-memory observers (torch 2.0+:
torch._C._cuda_attach_out_of_memory_observer, with the device, the bytes it
asked for, the device's total bytes - or the process's cap under
set_per_process_memory_fraction - and its free bytes) after it released its
lock and before it raises torch.OutOfMemoryError.  The probe attaches one when
the program initializes CUDA (torch.cuda._lazy_call: attaching initializes
CUDA, which a process that never uses the GPU must not do), so it costs
nothing until an OOM.  At one, the observer takes an audit labelled "oom"
(the full ledger with the holder walk, which reads the allocator's
statistics and allocates no device memory), reads the allocator's
reserved-but-free bytes and its largest free block (memory_stats and
memory_snapshot: host memory only), and records an oom row with the Python
stack of the failing allocation, the user's line first.  It never raises: the
program's exception, traceback and exit status are what they are without
tpaudit.  Whether the OOM ended the run or was caught (a batch-size finder)
is the analyzer's to judge (docs/ANALYZER.md, "Out of memory").
"""
import sys

from . import _facts
from . import _growth

# OOMs that get an audit of their own; later ones get their row only (the
# shim counts them all, and keeps a native stack for its first few).
KEEP_AUDITS = 4
PART = "oom_watch"  # this file's name among the probe's parts (_parts.py)


class _Watch:
    attached = False  # the observer is attached (once per process)
    seen = 0          # OOMs this process's observer saw
    recorder = None
    fail = None       # fail(exc): one line, this part off (_parts.py)
    enabled = None    # () -> the probe and this part are on
    set_rank = None


watch = _Watch()


def available(torch):
    """The observer entry point of this torch, None when it has none (before 2.0)."""
    return getattr(getattr(torch, "_C", None), "_cuda_attach_out_of_memory_observer", None)


def install(torch, recorder, fail, enabled, set_rank):
    """Attaches the observer when the program initializes CUDA (at once when it
    already did); does nothing on a torch without the observer or CUDA."""
    attach = available(torch)
    cuda = getattr(torch, "cuda", None)
    lazy = getattr(cuda, "_lazy_call", None)
    if attach is None or lazy is None:  # no observer in this torch, or no torch.cuda
        return False
    watch.recorder, watch.fail, watch.enabled, watch.set_rank = recorder, fail, enabled, set_rank

    def attach_once():
        if watch.attached:
            return
        try:
            attach(on_oom)
            watch.attached = True
        except Exception as exc:  # never break the program's CUDA start
            fail(exc)

    lazy(attach_once)
    return True


def step_in_flight():
    """The optimizer step the program is in (one past the most any optimizer
    took), -1 before any optimizer."""
    from . import _track
    counts = [entry[0] for entry in list(_track.step_counts.values())]
    return max(counts) + 1 if counts else -1


def allocator_state(torch, device):
    """(reserved-but-free bytes, largest free block) of the caching allocator
    on `device`, each None when unknown; reads host-side statistics only."""
    cuda = getattr(torch, "cuda", None)
    if cuda is None or not cuda.is_initialized():
        return None, None
    stats = cuda.memory_stats(device)
    reserved = stats.get("reserved_bytes.all.current")
    allocated = stats.get("allocated_bytes.all.current")
    reserved_free = reserved - allocated if reserved is not None and allocated is not None else None
    largest = 0
    for segment in cuda.memory_snapshot():
        if segment.get("device", device) != device:
            continue
        for block in segment.get("blocks", ()):
            if block.get("state") == "inactive":
                largest = max(largest, int(block.get("size", 0)))
    return reserved_free, largest


def on_oom(device, requested, total, free, frame=None):
    """The allocator's observer: an "oom" audit (the first KEEP_AUDITS), then
    the oom row.  Returns the row's count (tests call it with the observer's
    arguments), None when the probe is off; never raises."""
    if watch.recorder is None or (watch.enabled is not None and not watch.enabled()):
        return None
    try:
        import torch
        watch.seen += 1
        frame = frame if frame is not None else sys._getframe(1)
        py_stack = _growth.user_stack(frame)
        step = step_in_flight()
        audit_id = 0
        if watch.seen <= KEEP_AUDITS:
            if watch.set_rank is not None:
                watch.set_rank()
            # the holder walk always: the one moment the user needs to know who holds what
            audit_id = _facts.collect(watch.recorder, "oom", step,
                                      ledger=lambda rec, models, opts: _growth.leaks.ledger(rec, models, opts, True))
        reserved_free, largest = allocator_state(torch, device)
        return watch.recorder.oom({
            "source": "torch", "api": "torch caching allocator", "device": int(device),
            "requested": int(requested), "free_bytes": int(free), "total_bytes": int(total),
            "reserved_free": reserved_free, "largest_free": largest, "audit_id": audit_id or 0,
            "step": step, "py_stack": py_stack, "capture_native": 0})
    except Exception as exc:  # never break the program's own OutOfMemoryError
        if watch.fail is not None:
            watch.fail(exc)
        return None
