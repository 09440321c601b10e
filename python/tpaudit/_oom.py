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
reserved-but-free bytes and its largest free block (_allocator.free_state:
host memory only), and records an oom row with the Python
stack of the failing allocation, the user's line first.

The observer runs on whichever thread asked for the memory: the program's,
one of the autograd engine's device threads (a CUDA backward), a DataLoader's
pin-memory thread, or a native thread with no Python frame at all.  The
stack recorded is the user's (issuing_frame): the caller's when it has a line
of user code, else that of the thread inside backward() or autograd.grad(),
else the main thread's.  Each stage (stack, audit, allocator state) is
guarded on its own: the oom row is written whatever failed before it, and a
failure says so on one `tpaudit:` line and leaves the out-of-memory verdict
unjudged (_parts.py), never silently off.  It never raises: the program's
exception, traceback and exit status are what they are without tpaudit.
Whether the OOM ended the run or was caught (a batch-size finder) is the
analyzer's to judge (docs/ANALYZER.md, "Out of memory").
"""
import sys
import threading

from . import _allocator
from . import _collector
from . import _facts
from . import _growth
from . import _stacks
from . import _workspaces

# OOMs that get an audit of their own; later ones get their row only (the
# shim counts them all, and keeps a native stack for its first few).
KEEP_AUDITS = 4
PART = "oom_watch"  # this file's name among the probe's parts (_parts.py)


class _Watch:
    attached = False  # the observer is attached (once per process)
    seen = 0          # OOMs this process's observer saw
    last_step = None  # the step (or iteration) the last OOM struck in
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
    if counts:
        return max(counts) + 1
    calls = getattr(_growth.leaks, "calls", None)  # a loop without an optimizer: its iterations done
    done = calls.final_step() if calls is not None else None
    return done - 1 if done is not None else -1


# the functions through which a thread waits for the autograd engine
_BACKWARD_ENTRIES = ("_engine_run_backward", "backward", "grad", "run_backward")
_AUTOGRAD_DIR = "torch/autograd/"


def _in_backward(frame):
    """Whether the thread whose innermost frame is `frame` waits in backward()."""
    while frame is not None:
        code = frame.f_code
        if code.co_name in _BACKWARD_ENTRIES and _AUTOGRAD_DIR in code.co_filename.replace("\\", "/"):
            return True
        frame = frame.f_back
    return False


def issuing_frame(caller):
    """The innermost frame of the user's code that led to the failing
    allocation: `caller` (the observer's caller, None on a thread with no
    Python frame) when its stack has a user line; else, for a thread of the
    autograd engine, a pin-memory thread or one with no Python frame, the
    thread waiting in backward(), else the main thread; None when no thread
    has one."""
    if caller is not None and _stacks.user_stack(caller):
        return caller
    me = threading.get_ident()
    frames = {ident: frame for ident, frame in sys._current_frames().items() if ident != me}
    for frame in frames.values():
        if _in_backward(frame):
            return frame
    main = frames.get(threading.main_thread().ident)
    return main if main is not None else caller


def _stage(what, fn, *args, default=None):
    """fn(*args), or `default` when it raises, after one line naming the
    stage `what` that leaves the out-of-memory verdict unjudged (_parts.fail)."""
    try:
        return fn(*args)
    except Exception as exc:
        if watch.fail is not None:
            watch.fail(RuntimeError("%s: %r" % (what, exc)))
        return default


def _audit(step):
    if watch.set_rank is not None:
        watch.set_rank()
    # the holder walk always: the one moment the user needs to know who holds what
    return _facts.collect(watch.recorder, "oom", step,
                          ledger=lambda rec, models, opts: _growth.leaks.ledger(rec, models, opts, True))


def on_oom(device, requested, total, free, frame=None):
    """The allocator's observer: an "oom" audit (the first KEEP_AUDITS), then
    the oom row, written whatever stage before it failed.  Returns the row's
    count (tests call it with the observer's arguments), None when the probe
    is off or the row could not be written; never raises.  No garbage
    collection runs meanwhile (_collector): the OOM message counts the same
    bytes as without the probe."""
    with _collector.held():
        return _observe(device, requested, total, free, frame, sys._getframe(0).f_back)


def _observe(device, requested, total, free, frame, caller):
    try:
        if watch.recorder is None or (watch.enabled is not None and not watch.enabled()):
            return None
        watch.seen += 1
        frame = frame if frame is not None else _stage("stack", issuing_frame, caller)
        caller = None
        py_stack = _stage("stack", _stacks.user_stack, frame, default="") if frame is not None else ""
        in_backward = _stage("stack", _in_backward, frame, default=False)
        frame = None  # no frame of the program's kept past here
        step = _stage("step", step_in_flight, default=-1)
        watch.last_step = step
        _workspaces.backward_in_flight = in_backward  # the engine's buffers are then named in the ledger
        try:
            audit_id = _stage("audit", _audit, step, default=0) if watch.seen <= KEEP_AUDITS else 0
        finally:
            _workspaces.backward_in_flight = False
        reserved_free, largest = _stage("allocator", _allocator.free_state, device, default=(None, None))
        return watch.recorder.oom({
            "source": "torch", "api": "torch caching allocator", "device": int(device),
            "requested": int(requested), "free_bytes": int(free), "total_bytes": int(total),
            "reserved_free": reserved_free, "largest_free": largest, "audit_id": audit_id or 0,
            "step": step, "py_stack": py_stack, "capture_native": 0})
    except Exception as exc:  # never break the program's own OutOfMemoryError
        if watch.fail is not None:
            watch.fail(exc)
        return None
