"""The probe's parts, each turned off alone by an internal error in it.

An exception inside one part prints one "tpaudit:" line naming the part and
what is lost, turns that part off and leaves the rest running: the
ownership facts and stale detection go on (their own failure, in _hooks.py,
still turns the whole probe off).  The run's `python` field then reads

    on; unjudged: growth,stale; parts off: holder_walk,framework:generic

`unjudged` lists the verdicts that can no longer be clean (the analyzer
calls a run without an error finding inconclusive then: rules/judge.c);
it comes first so that a field cut at its 255 bytes still keeps it.
docs/PROBE.md has the table.
"""
import sys

# part -> (what is lost while it is off, the verdict it is needed for or None)
PARTS = {
    "forward_descriptor": ("the modules that ran forward and those the callers' frames hold: models are "
                           "found through the optimizers' parameters only", None),
    "replacement_events": ("replacement and creation events (no 'replaced at' or 'created at' stacks, "
                           "no parent links of modules set from now on)", "stale"),
    "growth_watch": ("the step samples and growth audits", "growth"),
    "ledger": ("the memory ledger", "growth"),
    "holder_walk": ("holder paths: tensors no model or optimizer owns are unattributed, so growth "
                    "findings cannot name a holder", "growth"),
    "oom_watch": ("part of an out-of-memory moment's audit, stack or allocator state (its oom row is still "
                  "written)", "oom"),
    "creation_stacks": ("the creation lines of held tensors", None),
    "phase_marks": ("the parts of each step (forward, backward, optimizer step) that own memory between "
                    "audits", None),
    "wrapper_discovery": ("the framework wrappers above the optimizers: their masters are not paired", "stale"),
    "framework:generic": ("the generic master/working pairing of unknown wrappers", "stale"),
    "framework:megatron": ("Megatron's master/working pairs", "stale"),
    "framework:deepspeed": ("DeepSpeed's master/working pairs", "stale"),
    "framework:colossalai": ("ColossalAI's master/working pairs", "stale"),
    "framework:fsdp2": ("FSDP2's parameter swaps and sharded twins", "stale"),
}
VERDICTS = {"growth": "memory growth", "stale": "stale tensors", "oom": "out of memory"}

off = {}  # part -> repr of the exception that turned it off, in the order they went off
recorder = None  # where the run's python field is written (set by _hooks.install)


def on(part):
    return part not in off


def status():
    """The run's python field while the probe is on."""
    if not off:
        return "on"
    lost = sorted({PARTS[p][1] for p in off if PARTS[p][1]})
    head = "on; unjudged: %s; " % ",".join(lost) if lost else "on; "
    return head + "parts off: " + ",".join(off)


def _say(line):
    try:  # a program may have set sys.stderr to None or closed it
        if sys.stderr is not None:
            sys.stderr.write(line + "\n")
    except Exception:
        pass


def fail(part, exc):
    """Turns `part` off after exc (once, one line); never raises."""
    if part in off:
        return
    try:
        text = repr(exc)
    except Exception:
        text = type(exc).__name__
    off[part] = text
    lost, needed = PARTS[part]
    verdict = "; no clean verdict on %s" % VERDICTS[needed] if needed else ""
    _say("tpaudit: probe part %s off after an internal error: %s; lost: %s%s" % (part, text, lost, verdict))
    try:
        if recorder is not None:
            recorder.set_run_info("python", status())
    except Exception:
        pass


def guard(part, fn, *args, default=None):
    """fn(*args), or `default` when the part is off or fails now."""
    if part in off:
        return default
    try:
        return fn(*args)
    except Exception as exc:
        fail(part, exc)
        return default
