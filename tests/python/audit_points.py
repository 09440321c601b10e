"""What every audit point of a run must say, not only the judged one: a
verdict can be read at any audit (`--fail-fast` stops on the first), so a test
checks the stale bytes of each entry of the JSON report's runs[].audit_points
against what it knows to be true at that step.  Shared by tests/python and
tests/frameworks."""


def _expected(stale, step, rank):
    if callable(stale):
        return stale(step, rank)
    if isinstance(stale, dict):
        return stale[step]
    return stale


def assert_every_audit(doc, stale, rank=None, steps=None):
    """Checks every audit point of every run that took a step audit (of
    `rank`, when given): judged (it saw the model) and holding the stale bytes
    `stale` says for its step (an int for every step, a dict step -> bytes, or
    a function of the step and the run's rank; step -1 is the exit audit, which holds
    nothing when it saw no optimizer any more).  A process that took
    no step audit (a launcher, a helper) must hold none.  `steps`, when given,
    is the list of steps the runs must have audited, in order.  Returns the
    number of audit points checked."""
    checked = 0
    training = [r for r in doc["runs"] if any(p["step"] >= 1 for p in r["audit_points"])]
    assert training, ("no run took a step audit", doc["runs"])
    for run in doc["runs"]:
        points = run["audit_points"]
        if run not in training:
            assert all(p["stale_bytes"] == 0 for p in points), (run["pid"], points)
            continue
        if rank is not None and run["rank"] != rank:
            continue
        if steps is not None:
            # an exit audit that saw no optimizer (its engine's cycle collected
            # first) may come where none is expected; it is checked below to hold nothing
            taken = [p["step"] for p in points if -1 in steps or not (p["step"] == -1 and p.get("saw_optimizer") is False)]
            assert taken == steps, (run["rank"], points)
        for p in points:
            want = _expected(stale, p["step"], run["rank"])
            # An exit audit taken after the program dropped its optimizer (main() returned,
            # the engine's reference cycle collected) holds nothing stale; any other audit
            # that saw no optimizer must be one the test expects to hold nothing.
            if p.get("saw_optimizer", True) is False:
                assert p["step"] == -1 or want == 0, (run["rank"], p, "saw no optimizer, want", want, points)
                want = 0
            assert p.get("saw_model", True) and p["stale_bytes"] == want, (run["rank"], p, want, points)
            checked += 1
    assert checked, ("no audit point of rank", rank, doc["runs"])
    return checked


def judged_stale_bytes(doc, rank=None):
    """The stale bytes the judged audit's errors retain (of `rank`): what
    every audit after the replacement must hold too, when nothing changed
    ownership after it."""
    return sum(f["retained_bytes"] for f in doc["findings"] if f["severity"] == "error" and f["rank"] == rank)


def stale_from(doc, first_step):
    """The expectation of a run whose bug is made before step `first_step`
    and left alone: nothing stale before, the judged bytes of the rank from
    it on (and at exit)."""
    return lambda step, rank: judged_stale_bytes(doc, rank) if step < 0 or step >= first_step else 0
