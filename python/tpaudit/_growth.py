"""Growth watch: a cheap sample of live memory at every optimizer step, and
the extra audits (label 'growth') taken once the samples suggest growth.

The sample (table sample) is the live bytes _allocator.py reads: the CUDA
caching allocator's allocated bytes on a GPU, on the CPU the bytes malloc
has in use, with sys.getallocatedblocks() beside it every BLOCKS_EVERY steps.  Steps 1..WARMUP are warm-up (optimizer state,
allocator fill, workspaces, compile pools) and are not judged.  Growth is
suspected, at the earliest at step WARMUP + 2 (so a run of 8 steps has
room for the three audits the analyzer needs), when either
  - the samples of three successive steps from step WARMUP on each rose
    over the one before by more than MIN_RISE (a loop that keeps something
    every step; a sawtooth, such as a cache cleared every few steps, falls
    before its third sample), or
  - two successive windows' minima (WINDOW steps each, after warm-up) each
    rose over the one before by more than MIN_RISE (growth that skips
    steps; minima make a sawtooth, gradient accumulation or a periodic
    eval flat).
Then the probe takes 'growth' audits at the step of the suspicion and
GAPS steps after it (at most TPAUDIT_GROWTH_AUDITS), each with the full
ledger and holder walk, and records the creation stack of every storage
made in the step before each later growth audit (CreationRecorder), so the
ledger can say which line made what a holder keeps.  At exit it takes one
more audit when growth audits were taken or live memory moved by more than
MIN_RISE since the last audit (exit_audit).  docs/PROBE.md describes it;
the analyzer judges the audits.
"""
import gc
import os
import sys

from . import _allocator
from . import _call_lines
from . import _calls
from . import _parts
from . import _stacks
from . import _track

WARMUP = 3
WINDOW = 3
MIN_RISE = 64 << 10
BLOCKS_EVERY = 32
GAPS = (1, 2, 6, 14)


def enabled():
    """False when TPAUDIT_LEAKS=off."""
    return os.environ.get("TPAUDIT_LEAKS", "on").strip().lower() not in ("off", "0", "no")


def max_audits():
    try:
        return max(0, int(os.environ.get("TPAUDIT_GROWTH_AUDITS", "4")))
    except ValueError:
        return 4


class Watch:
    """Per-process state of the growth watch (one per probe)."""

    def __init__(self, recorder, limit=None):
        self.rec = recorder
        self.limit = max_audits() if limit is None else limit
        self.last_step = 0
        self.window = []          # live bytes of the current window's steps
        self.minima = []          # least live bytes of each full window after warm-up
        self.recent = []          # live bytes of the last three steps from WARMUP on
        self.live = None          # live bytes of the latest sample
        self.at_audit = None      # live bytes sampled when the last audit was taken
        self.due = []             # steps at which a growth audit is due
        self.taken = 0
        self.suspected = None
        self.recorder = None      # CreationRecorder running for the coming audit
        self.fresh = {}           # data_ptr -> (sequence, stack, alive test) of the recording no audit took yet
        self.previous = {}        # the same of the recording the last audit took
        self.sequence = 0

    def sample(self, step):
        """Records the sample of `step` (once per step number); returns
        'growth' when a growth audit is due now, else None."""
        if step <= self.last_step:
            return None
        self.last_step = step
        live, reserved, device = _allocator.live_bytes()
        self.live = live
        # sys.getallocatedblocks() walks the allocator's arenas (0.1-0.4 ms on
        # a big heap): read once every BLOCKS_EVERY steps, for the reports only.
        blocks = sys.getallocatedblocks() if step % BLOCKS_EVERY == 0 else -1
        self.rec.sample(step, device, live, reserved, blocks)
        if self.recorder is not None and step in self.due:
            recorder, self.recorder = self.recorder, None
            self._keep_created(_parts.guard("creation_stacks", recorder.stop, default={}))
        if step >= WARMUP and self.suspected is None:
            self.recent = (self.recent + [live])[-3:]
            if step > WARMUP:
                self.window.append(live)
            if len(self.window) == WINDOW:
                self.minima.append(min(self.window))
                self.window = []
            if _rising(self.recent) or (len(self.window) == 0 and _rising(self.minima[-3:])):
                self.suspected = step
                self.due = ([step] + [step + g for g in GAPS])[:self.limit]
        # Record over the step before a later growth audit: a tensor a holder
        # keeps is made in one step's forward and kept after that step's update.
        if self.due and step + 1 in self.due and step not in self.due:
            self.start_recorder()
        if step in self.due:
            self.taken += 1
            return "growth"
        return None

    def start_recorder(self):
        if self.recorder is None:
            self.recorder = _parts.guard("creation_stacks", CreationRecorder.start)

    def audited(self, step):
        """After an audit at `step`: its live bytes are the exit audit's
        reference; a growth audit due at the next step records that step."""
        self.at_audit = self.live
        if step in self.due and step + 1 in self.due:
            self.start_recorder()

    def wants_exit_audit(self):
        return self.taken > 0

    def moved(self):
        """Live memory at the last step's sample differs from that at the last
        audit by more than MIN_RISE (a short run whose default audits came
        before its growth showed); the teardown after the loop is not looked
        at, nor a run that ended in warm-up."""
        if self.live is None or self.last_step <= WARMUP:  # warm-up moves memory by design; never judged
            return False
        return self.at_audit is None or abs(self.live - self.at_audit) > MIN_RISE

    def _keep_created(self, made):
        """The recording that just stopped, its sequences counted on from the
        one before."""
        base = self.sequence
        self.fresh = {ptr: (entry[0] + base,) + tuple(entry[1:]) for ptr, entry in made.items()}
        self.sequence = base + len(made) + 1

    def take_created(self):
        """The creation stacks for the audit now being taken: the recording
        made for it, and of the one before (a tensor made in the step before
        one growth audit may join its holder only after that audit, appended
        after the optimizer step) the tensors still alive: a storage freed
        since (a backward's temporary) may have left its address to a tensor
        made later, unrecorded."""
        made = {ptr: entry[:2] for ptr, entry in self.previous.items()
                if len(entry) < 3 or entry[2] is None or entry[2]() is not None}
        made.update((ptr, entry[:2]) for ptr, entry in self.fresh.items())
        if self.fresh:
            self.previous, self.fresh = self.fresh, {}
        return made

    def close(self):
        recorder, self.recorder = self.recorder, None
        if recorder is not None:
            _parts.guard("creation_stacks", recorder.stop)


def _rising(minima):
    return len(minima) == 3 and minima[1] - minima[0] > MIN_RISE and minima[2] - minima[1] > MIN_RISE


class CreationRecorder:
    """Records, for one step, the Python stack that made each new storage:
    on a GPU through torch.cuda.memory._record_memory_history (the caching
    allocator's own record), on the CPU through a TorchDispatchMode, or,
    once torch.compile traced a frame, from the step's root-module call
    (_call_lines.py)."""

    @staticmethod
    def start():
        torch = sys.modules.get("torch")
        if torch is None:
            return None
        if torch.cuda.is_initialized():
            return _CudaHistory(torch)
        if _compiled():  # a dispatch mode would change what torch.compile traces
            return _call_lines.CallLineRecorder(torch, _storage_test())
        return _DispatchRecorder(torch)


def _compiled():
    """True once torch.compile has traced a frame in this process."""
    utils = sys.modules.get("torch._dynamo.utils")
    try:
        return bool(utils is not None and utils.counters["frames"].get("total"))
    except Exception:
        return True


def _tree_leaves():
    """torch.utils._pytree.tree_leaves (2.2+), else the leaves of its
    tree_flatten (2.1)."""
    from torch.utils import _pytree
    leaves = getattr(_pytree, "tree_leaves", None)
    return leaves if leaves is not None else (lambda tree: _pytree.tree_flatten(tree)[0])


def _storage_test():
    """A function of a tensor giving a () -> alive test of its storage, or
    None: the op's own output object dies when the program keeps a view of it
    (HF's logits are a view of the matmul's output), the storage lives on.
    The weak reference (torch's StorageWeakRef) never keeps the storage's
    memory: it is freed with the last tensor that uses it."""
    try:
        from torch.multiprocessing.reductions import StorageWeakRef
    except Exception:
        return lambda t: None

    def test(t):
        try:
            ref = StorageWeakRef(t.untyped_storage())
        except Exception:
            return None
        return lambda: None if ref.expired() else True
    return test


class _DispatchRecorder:
    def __init__(self, torch):
        storage_alive = _storage_test()
        from torch.utils._python_dispatch import TorchDispatchMode
        tree_leaves = _tree_leaves()
        made = self.made = {}
        counter = [0]
        base = torch.Tensor

        class Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                out = func(*args, **(kwargs or {}))
                try:
                    note(args, kwargs, out)
                except Exception:  # the op's result goes back whatever happens here
                    pass
                return out

        def note(args, kwargs, out):
            inputs = set()
            for t in tree_leaves((args, kwargs)):
                if issubclass(type(t), base):
                    try:
                        inputs.add(t.untyped_storage().data_ptr())
                    except Exception:
                        pass
            for t in tree_leaves(out):
                if issubclass(type(t), base):
                    try:
                        ptr = t.untyped_storage().data_ptr()
                    except Exception:
                        continue
                    if ptr and ptr not in inputs:  # a new storage, not an update in place
                        counter[0] += 1
                        made[ptr] = (counter[0], _stacks.user_stack(sys._getframe(2)), storage_alive(t))

        self.mode = Mode()
        self.mode.__enter__()

    def stop(self):
        try:
            self.mode.__exit__(None, None, None)
        except Exception:
            pass
        made, self.made = self.made, {}
        return made


class _CudaHistory:
    def __init__(self, torch):
        self.torch = torch
        enabled = getattr(torch._C, "_cuda_isHistoryEnabled", None)
        self.users = bool(enabled is None or enabled())  # the program records its own: leave it as it is
        if not self.users:
            torch.cuda.memory._record_memory_history(max_entries=100000)

    def stop(self):
        mem = self.torch.cuda.memory
        made = {}
        try:
            snap = mem._snapshot()
            seq = 0
            for seg in snap.get("segments", ()):
                for block in seg.get("blocks", ()):
                    frames = block.get("frames") or ()
                    if block.get("state") != "active_allocated" or not frames:
                        continue
                    seq += 1
                    made[block["address"]] = (seq, _stacks.text(
                        ((str(f.get("filename", "")), int(f.get("line", 0)), str(f.get("name", "?"))) for f in frames),
                        _stacks.USER_LINES, user_first=True))
        finally:
            if not self.users:
                mem._record_memory_history(enabled=None)
        return made


class Leaks:
    """The probe's leak side, as _hooks.py calls it: the step sample, the
    ledger of every audit, the growth audit at exit.  Each of its parts
    (growth_watch, ledger, holder_walk, creation_stacks) turns off alone
    after one "tpaudit:" line (_parts.py); the audit it failed in goes on."""

    def __init__(self):
        self.on = False
        self.watch = None
        self.calls = None  # _calls.RootCalls: the sample point of loops without an optimizer step
        self.audit = None  # audit(label, step): the probe's growth audit (_hooks.growth_audit)

    def install(self, recorder, audit=None):
        self.rec = recorder
        self.on = enabled()
        self.watch = Watch(recorder) if self.on and hasattr(recorder, "sample") else None
        if self.watch is not None and audit is not None:
            self.audit = audit
            self.calls = _calls.RootCalls(self._on_iteration, self._restart_watch, self._watch_failed)
            _track.module_call_listeners.append(self.calls)

    def restart(self):
        """A new watch, its step count from 1 (the pytest plugin, at each
        audited test: each test is a run of its own)."""
        if self.calls is not None:
            self.calls.reset()
        self._restart_watch()

    def _restart_watch(self):
        if self.watch is not None:
            self.watch.close()
            self.watch = Watch(self.rec)

    def _on_iteration(self, step):
        """Iteration `step` of a loop without an optimizer step is done: its
        sample, and the growth audit when one is due."""
        growth = self.on_step(step, optimizer=False)
        if growth:
            self.audit(growth, step)
            # as a step audit: an unchanged run takes no second audit at exit after its growth audit there
            _track.changes.at_last_step_audit = _track.changes.count

    def on_step(self, step, optimizer=True):
        """'growth' when a growth audit is due before this step, else None."""
        if self.watch is None:
            return None
        if optimizer and self.calls is not None and self.calls.optimizer_step():
            self._restart_watch()
        try:
            return self.watch.sample(step)
        except Exception as exc:
            self._watch_failed(exc)
            return None

    def _watch_failed(self, exc):
        """The growth watch off after exc (one line, _parts.py)."""
        _parts.fail("growth_watch", exc)
        watch, self.watch = self.watch, None
        if watch is not None:
            watch.close()

    def ledger_for(self, label):
        """The ledger step of an audit labelled `label` (_facts.collect's
        `ledger`): every audit walks for holders (docs/PROBE.md gives its
        cost), so the default audits name what the loop's locals, module
        globals and other objects hold, as growth audits do."""
        return lambda rec, models, optimizers: self.ledger(rec, models, optimizers, True)

    def ledger(self, rec, models, optimizers, walk=True):
        """Writes the open audit's ledger (with the holder walk when asked,
        leak detection is on and the walk is not off)."""
        from . import _ledger
        created = self.watch.take_created() if self.watch is not None and walk else None
        _parts.guard("ledger", _ledger.record, rec, models, optimizers, None, walk and self.on, created)

    def audited(self, step):
        """Tells the watch an audit was taken at `step` (any label)."""
        if self.watch is None:
            return
        try:
            self.watch.audited(step)
        except Exception as exc:
            self._watch_failed(exc)

    def exit_audit(self, run_audit):
        """The last growth audit, at exit, when growth audits were taken.
        Objects kept only by reference cycles (a LightningModule and its
        Trainer, a generator's frame) are collected first, as the
        interpreter's shutdown would: what no root reaches is no holder,
        and the run is then judged at the last audit that saw its holders."""
        watch = self.watch
        if watch is None or not watch.wants_exit_audit():
            return None
        last = self.calls.final_step() if self.calls is not None else None
        oom = sys.modules.get(__package__ + "._oom")
        if last is not None and oom is not None and oom.watch.last_step == last - 1:
            last = None  # the OOM struck in that iteration: it never ended (no progress after the OOM)
        if last is not None:  # the last iteration's sample: what it kept is at exit too
            _parts.guard("growth_watch", watch.sample, last)
        watch.close()
        gc.collect()
        return run_audit("growth", watch.last_step)

    def moved(self):
        """Whether live memory moved since the last audit (Watch.moved); the
        exit audit is then taken even when ownership did not change."""
        try:
            return self.watch is not None and self.watch.moved()
        except Exception as exc:
            self._watch_failed(exc)
            return False


leaks = Leaks()
