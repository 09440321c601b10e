"""Torch hooks of the probe, installed once torch has been imported.

Optimizer construction, the global optimizer step pre-hook (audits at the
steps TPAUDIT_AUDIT names; under TPAUDIT_FAIL_FAST it waits for each audit's
verdict and ends the run at one with an error; steps it does not see, a
compiled opt.step's, are taken at the next root-module call, zero_grad or
eager backward by _silent_steps.py and _backward.py), the modules that ran
forward (_forward.py: a twin of Module.__call__, no module hook), and
register_parameter / __setattr__ / add_module patches that record parent
links and replacement events.  Each patched function and the step
pre-hook test torch's is_dynamo_compiling first: dynamo folds it to True,
so what it traces of them is the original call alone.  An exception in one of the parts _parts.py
names turns that part off alone; any other (the optimizer hooks, the
audit's ownership facts) turns the probe off.  Each says so in one
"tpaudit:" line on stderr (when the program has one); none reaches the
program.
"""
import atexit
import functools
import gc
import os
import sys

from . import _backward
from . import _collector
from . import _config
from . import _dynamo_frames
from . import _facts
from . import _forward
from . import _growth
from . import _oom
from . import _native as N
from . import _parts
from . import _peak
from . import _peak_moment
from . import _phases
from . import _silent_steps
from . import _stacks
from . import _step_hook_out
from . import _track
from . import _versions
from .frameworks import fsdp2, holders

class _State:
    enabled = True
    installed = False
    recorder = None
    plan = None
    reported = False
    fail_fast = False  # TPAUDIT_FAIL_FAST: step audits wait for their verdict
    peak_window = None  # _peak_moment.PeakWindow under TPAUDIT_PEAK=backward


state = _State()


def say(line):
    """Writes one "tpaudit:" line to the program's sys.stderr, if it has one
    that takes it: a program that set sys.stderr to None, or started with fd 2
    closed, or closed the stream, never gets an error from the probe."""
    try:
        stream = sys.stderr
        if stream is not None:
            stream.write(line + "\n")
    except Exception:
        pass


def fail(exc):
    """Report an internal error once and switch the probe off; never raises."""
    state.enabled = False
    _parts.recorder = None  # the run's python field says "off" from now on
    if not state.reported:
        state.reported = True
        try:
            text = repr(exc)
        except Exception:
            text = type(exc).__name__
        say("tpaudit: python probe off after an internal error: %s" % (text,))
        try:
            if state.recorder is not None:
                state.recorder.set_run_info("python", "off: internal error")
        except Exception:
            pass


def _never():
    return False


_compiling = _never  # torch's is_dynamo_compiling (_patch): dynamo reads it by this module's name


def _checked(test):
    """test when it answers False here (outside dynamo), else _never: the
    patched calls and the step hook must never raise from it."""
    try:
        if test is not None and test() is False:
            return test
    except Exception:
        pass
    return _never


def _stack():
    return _stacks.event_stack(sys._getframe(1))


def _set_rank():
    dist = sys.modules.get("torch.distributed")
    if dist is not None and dist.is_available() and dist.is_initialized():
        state.recorder.set_rank(dist.get_rank(), dist.get_world_size())


def run_audit(label, step, models=None, optimizers=None):
    if not state.enabled or state.recorder is None:
        return None
    try:
        _set_rank()
        return _facts.collect(state.recorder, label, step, models, optimizers, ledger=_growth.leaks.ledger_for(label))
    except Exception as exc:  # never break the user's program
        fail(exc)
        return None


def judge(audit_id, may_stop=True):
    """The analyzer's verdict on ended audit audit_id, judged in the shim with
    the analyzer's own queries (_native.NativeRecorder.verdict), or None.
    When the shim says stop (TPAUDIT_FAIL_FAST and an error at the audit,
    whose rows are on disk by now) and may_stop, the probe goes off and the
    run ends here: SystemExit with the shim's status, so the program's
    finally blocks and atexit handlers run and the database is finished by
    the normal exit."""
    verdict = getattr(state.recorder, "verdict", None)
    if audit_id is None or verdict is None or not state.enabled:
        return None
    try:
        v = verdict(audit_id)
    except Exception as exc:  # never break the user's program
        fail(exc)
        return None
    if v is not None and v["stop"] and may_stop:
        state.enabled = False
        raise SystemExit(v["exit_status"])
    return v


def _describe(module):
    return "%s(%s)" % (type(module).__name__, module.extra_repr())


def _on_optimizer_created(opt):
    _track.optimizers.put(opt, None)
    _track.step_counts.pop(id(opt), None)  # a dead optimizer's at this address: this one counts from 1
    _track.changed()
    names = []
    for group in opt.param_groups:
        given = group.get("param_names")
        for i, p in enumerate(group["params"]):
            name = given[i] if given and i < len(given) else _track.param_name(p)
            _track.remember_name(p, name)
            names.append(name or "?")
    state.recorder.event(N.EVENT_OPTIMIZER_CREATED, name=type(opt).__name__,
                         holder_class=type(opt).__name__, holder_id=id(opt),
                         detail=",".join(names)[:4000], py_stack=_stack())


def _on_param_set(module, name, old, new):
    prefix = _track.module_path(module)
    path = (prefix + "." + name) if prefix else name
    if new is not None:
        first_home = _track.owners.get(new) is None
        _track.owners.put(new, (_track.weakref.ref(module), name))
        if first_home and state.recorder is not None:
            # Where the tensor was made: its first registration on a module.
            state.recorder.event(N.EVENT_PARAM_CREATED, name=path, holder_class=type(module).__name__,
                                 holder_id=id(module), new_key=id(new),
                                 detail=str(tuple(new.shape)), py_stack=_stack())
    if old is not None and old is not new and state.recorder is not None:
        _track.remember_name(old, path)
        _track.changed()
        state.recorder.event(N.EVENT_PARAM_REPLACED, name=path, holder_class=type(module).__name__,
                             holder_id=id(module), old_key=id(old),
                             new_key=id(new) if new is not None else 0,
                             detail="%s -> %s" % (tuple(old.shape), tuple(new.shape) if new is not None else None),
                             py_stack=_stack())


def _on_module_set(parent, name, old, new):
    prefix = _track.module_path(parent)
    path = (prefix + "." + name) if prefix else name
    if old is not None and old is not new and state.recorder is not None:
        _track.changed()
        stack = _stack()
        state.recorder.event(N.EVENT_MODULE_REPLACED, name=path, holder_class=type(parent).__name__,
                             holder_id=id(parent), old_key=id(old), new_key=id(new),
                             detail="%s -> %s" % (_describe(old), _describe(new)), py_stack=stack)
        new_params = dict(new.named_parameters())
        for sub, p in old.named_parameters():
            full = path + "." + sub
            _track.remember_name(p, full)
            q = new_params.get(sub)
            state.recorder.event(N.EVENT_PARAM_REPLACED, name=full, holder_class=type(parent).__name__,
                                 holder_id=id(parent), old_key=id(p), new_key=id(q) if q is not None else 0,
                                 detail="%s -> %s" % (tuple(p.shape), tuple(q.shape) if q is not None else None),
                                 py_stack=stack)
    _track.parents.put(new, (_track.weakref.ref(parent), name))


def _on_fsdp_swap(module, name, old, new, swap):
    """FSDP2's direct `_parameters[name] = ...`: a sharded/unsharded swap only
    keeps the names current; anything else is a replacement."""
    if not state.enabled:
        return
    if swap:
        if _track.owners.get(new) is None:
            _track.owners.put(new, (_track.weakref.ref(module), name))
        return
    if _parts.on("replacement_events"):
        _parts.guard("replacement_events", _on_param_set, module, name, old, new)


def _discover_holders(opt, frame):
    """Objects above opt among the callers' `self`s (the audit adds a gc
    referrer scan when it needs one: _facts.discover_above)."""
    _track.remember_holders(opt, holders.from_frames(opt, frame))


def growth_audit(label, step):
    """A growth audit at `step` (Leaks: an optimizer step's or an iteration's);
    under TPAUDIT_FAIL_FAST its verdict may end the run."""
    grown = run_audit(label, step)
    _growth.leaks.audited(step)
    if grown is not None and state.fail_fast:
        judge(grown)


def backward_audit(label, step):
    """An audit inside the step's backward (_peak.py), with the collector held
    as the step hook's; under TPAUDIT_FAIL_FAST its verdict may end the run."""
    window = state.peak_window
    if window is not None:
        _parts.guard(_peak_moment.PART, window.begin)
    with _collector.held():
        audit_id = run_audit(label, step)
    if window is not None:
        _parts.guard(_peak_moment.PART, window.opened, step)
    if audit_id is not None and state.fail_fast:
        judge(audit_id)


def exit_audit():
    """The exit audit, taken only when ownership changed after the last step
    audit (or none was taken), or live memory moved since the last audit
    (growth the default audits came too early to see; after a growth audit
    at exit it has not): an unchanged run keeps its step verdicts."""
    grown = _growth.leaks.exit_audit(run_audit)
    if _track.changes.at_last_step_audit == _track.changes.count and (grown is not None or not _growth.leaks.moved()):
        return grown
    if grown is None and _growth.leaks.moved():
        gc.collect()  # as before a growth audit at exit: what only a reference cycle keeps is no holder
    audit_id = run_audit("exit", -1)
    judge(audit_id, may_stop=False)  # its line, if it is the first with an error, before the shim ends
    return audit_id


def _held(module, table, name):
    """module.<table>[name] as it is before a patched call, None when unknown."""
    try:
        return module.__dict__.get(table, {}).get(name)
    except Exception:
        return None


def _after(on_call, *args):
    """Runs the probe's part of a patched call; an error turns the probe off."""
    try:
        on_call(*args)
    except Exception as exc:
        fail(exc)


def _events():
    """True while the probe records replacement and creation events (never
    while dynamo traces: it folds _compiling() and traces no further)."""
    return not _compiling() and state.enabled and _parts.on("replacement_events")


def _patch(torch):
    """Patches Optimizer.__init__, Module.register_parameter, __setattr__
    and add_module; each keeps the original's name, qualname, module, doc
    and signature (functools.wraps), so it pickles and reads as before."""
    import functools
    global _compiling
    _compiling = _checked(_forward.compiling_test(torch))
    _dynamo_frames.install(torch)
    Module = torch.nn.Module
    orig_init = torch.optim.Optimizer.__init__
    orig_register = Module.register_parameter
    orig_setattr = Module.__setattr__
    orig_add = Module.add_module

    @functools.wraps(orig_init)
    def init(self, *args, **kwargs):
        orig_init(self, *args, **kwargs)
        if state.enabled:
            _parts.guard("forward_descriptor", _forward.rearm)
            _after(_on_optimizer_created, self)

    @functools.wraps(orig_register)
    def register_parameter(self, name, param):
        old = _held(self, "_parameters", name) if _events() else None
        orig_register(self, name, param)
        if _events():
            _parts.guard("replacement_events", _on_param_set, self, name, old, param)

    @functools.wraps(orig_setattr)
    def setattr_(self, name, value):
        if not _events() or not isinstance(value, Module):
            return orig_setattr(self, name, value)
        old = _held(self, "_modules", name)
        orig_setattr(self, name, value)
        _parts.guard("replacement_events", _on_module_set, self, name, old, value)

    @functools.wraps(orig_add)
    def add_module(self, name, module):
        old = _held(self, "_modules", name) if _events() else None
        orig_add(self, name, module)
        if _events() and module is not None:
            _parts.guard("replacement_events", _on_module_set, self, name, old, module)

    torch.optim.Optimizer.__init__ = init
    Module.register_parameter = register_parameter
    Module.__setattr__ = setattr_
    Module.add_module = add_module
    _parts.guard("forward_descriptor", _forward.install, torch)

    counts = _track.step_counts
    plan = state.plan

    def step_pre(opt, _args, _kwargs):
        if _compiling() or not state.enabled:
            return  # a compiled step: dynamo folds the test, and traces nothing of the probe
        # run eagerly by a frame dynamo left (torch 2.2's compiled opt.step):
        # its callback is off while the probe works, so it converts no frame of it
        # (the callback goes off before the collector hold's own frames run)
        prior = _dynamo_frames.callback_set(None)
        try:
            with _collector.held():
                silent.hooked(opt)
                if marks is not None:
                    marks.step_starts(opt)
                on_step(opt, sys._getframe(1))
        finally:
            _dynamo_frames.callback_set(prior)

    def silent_step(opt, caller):
        """A step the pre-hook did not see (_silent_steps.py), taken with
        dynamo's callback off as the hook's are."""
        if not state.enabled:
            return
        prior = _dynamo_frames.callback_set(None)
        try:
            with _collector.held():
                on_step(opt, caller)
        finally:
            _dynamo_frames.callback_set(prior)

    def on_step(opt, caller):
        entry = counts.get(id(opt))
        if entry is None:
            entry = counts[id(opt)] = [0, plan.first]  # [steps taken, next step due]
        entry[0] += 1
        n = entry[0]
        growth = _growth.leaks.on_step(n)
        if n != entry[1] and growth:
            growth_audit(growth, n)
        if n != entry[1]:
            return
        try:
            entry[1] = plan.next_after(n)
        except Exception as exc:
            fail(exc)
            return
        _parts.guard("forward_descriptor", _forward.rearm)
        _parts.guard("wrapper_discovery", _discover_holders, opt, caller)
        audit_id = run_audit("step", n)
        _growth.leaks.audited(n)
        if audit_id is not None:
            _track.changes.at_last_step_audit = _track.changes.count
            if state.fail_fast:
                judge(audit_id)

    # steps the pre-hook does not see (a compiled opt.step), taken at the
    # next zero_grad, eager root-module call (before the growth watch's own
    # listener) or eager Tensor.backward (_backward.py)
    silent = _silent_steps.SilentSteps(silent_step)
    _track.module_call_listeners.insert(0, silent)
    _track.backward_listeners.append(silent)
    marks = None
    if _peak.wanted():
        state.peak_window = _peak_moment.PeakWindow(state.recorder)
        atexit.register(state.peak_window.close)
        _track.backward_listeners.append(_peak.BackwardAudits(plan, counts, backward_audit))
        marks = _phases.PhaseMarks(state.recorder, counts, state.peak_window)
        _track.module_call_listeners.append(marks.module_called)
        _track.marked_call_listeners.append(marks.submodule_called)
        _track.backward_listeners.append(marks.backward_started)
    _parts.guard("forward_descriptor", _silent_steps.listen_at_zero_grad, torch, silent,
                 marks.zero_grad if marks is not None else None)
    _parts.guard("forward_descriptor", _backward.install, torch)
    import torch.optim.optimizer as optimizer_mod
    handle = optimizer_mod.register_optimizer_step_pre_hook(step_pre)
    # torch 2.2: out again once torch.compile strips the step hooks (a compiled
    # step bound before would show it to dynamo); its steps are then silent ones
    def hook_out():
        handle.remove()
        silent.counts = True
    _step_hook_out.install(_versions.release(getattr(torch, "__version__", "")), hook_out, fail)
    if state.plan.at_exit:
        atexit.register(exit_audit)
    fsdp2.watch(_on_fsdp_swap)


def install(recorder):
    """Installs the hooks on the imported torch (once)."""
    if state.installed or not state.enabled:
        return
    state.installed = True
    state.recorder = recorder
    _parts.recorder = recorder
    try:
        state.plan = _config.audit_plan()
        state.fail_fast = os.environ.get("TPAUDIT_FAIL_FAST", "0") not in ("", "0")
        _growth.leaks.install(recorder, growth_audit)
        import torch
        _versions.check(torch, say)
        _patch(torch)
        _oom.install(torch, recorder, functools.partial(_parts.fail, _oom.PART),
                     lambda: state.enabled, _set_rank)  # on after its own failure: the oom row still counts
        recorder.set_run_info("python", _parts.status())
    except Exception as exc:
        fail(exc)
