"""memory_growth wherever the loop lives (issue 49): module-level `for` and
`while` loops whose global `out` also binds the newest logits, a function's
loop whose newest logits are also an attribute, and eval loops with no
optimizer at all (module level and in a function), each at 10 and 20 steps
with the rate within 5% of the bytes kept a step, the line that made them
and a failing gate; the twins (a module-level loop keeping argmax only, an
eval loop's deque(maxlen=6), which makes the probe take growth audits and
then stays flat) clean with their audits checked; an eval loop after training
found by its iterations: scenarios/loops.py.  Loops of HF `generate` calls,
where only transformers calls the model (a function's `for` loop, a
module-level `while` loop that rebinds no variable), each call's output
kept with its KV cache, found with the bytes one output holds a call; one
long `generate` (its output growing token by token within the call) and a
loop keeping a deque(maxlen=6) of outputs clean: scenarios/generation.py."""
import pytest

from leakrun import (assert_clean_and_audited, assert_every_ledger_adds_up, assert_growth, audits_with_ledgers, cli,
                     first_user_frame, line_of, one_growth, report, verdict_line)
from plain import LOGITS_BYTES as LOGITS

SCRIPT = "loops.py"
RATE_TOLERANCE = 0.05
STEPS = (10, 20)
# case: whether an optimizer steps, the `# made:` marker of the line that makes the kept logits
LEAKS = {
    "module_for": (True, "module_for"),
    "module_while": (True, "module_while"),
    "attribute": (True, "attribute"),
    "eval_module": (False, "eval_module"),
    "eval_function": (False, "eval_function"),
}
TWINS = ["module_twin", "eval_twin"]


@pytest.mark.parametrize("steps", STEPS)
@pytest.mark.parametrize("case", sorted(LEAKS))
def test_loop_leak_has_its_rate_and_line(audited_run, case, steps):
    trains, made = LEAKS[case]
    out, r = audited_run(SCRIPT, case, "--steps", str(steps))
    assert r.returncode == 0, r.stderr[-4000:]
    audits = assert_every_ledger_adds_up(out)
    growth_audits = [a for _, a, _, _ in audits if a["label"] == "growth"]
    assert len(growth_audits) >= 3, audits
    doc = report(out)
    finding = one_growth(doc)
    words = ["seen"] if case == "attribute" else ["__main__.kept"]
    assert_growth(finding, (1 - RATE_TOLERANCE) * LOGITS, (1 + RATE_TOLERANCE) * LOGITS, words, steps)
    file, line = first_user_frame(finding["growth"]["created_at"])
    assert file.endswith(SCRIPT) and line == line_of(SCRIPT, made), (file, line, finding)
    (run,) = doc["runs"]
    points = run["audit_points"]
    assert len(points) == run["audits"] == len(audits), (points, audits)
    # every audit of a loop with no optimizer says so (the training loops' step audits saw theirs)
    if trains:
        assert all(p.get("saw_optimizer", True) for p in points if p["step"] in (1, 2)), points
    else:
        assert all(p.get("saw_optimizer") is False for p in points), points
    assert all(p["stale_bytes"] == 0 for p in points), points
    for _, audit, owners, _ in audits:
        # at each growth audit inside the loop (its model alive) the list holds every
        # step's logits so far: the loop's `out` (a global at module level) yields the newest to it
        if audit["label"] == "growth" and any(o["owner_kind"] == "parameter" for o in owners):
            kept = [o for o in owners if o["owner_kind"] == "held" and any(w in o["owner"] for w in words)]
            assert kept and kept[0]["bytes"] == audit["step"] * LOGITS, (audit, owners)
    assert "MEMORY GROWTH" in verdict_line(r), r.stderr
    assert cli("gate", out).returncode == 1
    assert cli("gate", "--max-growth", "64KiB", out).returncode == 1


@pytest.mark.parametrize("steps", STEPS)
@pytest.mark.parametrize("case", TWINS)
def test_loop_twin_reports_nothing(audited_run, case, steps):
    out, r = audited_run(SCRIPT, case, "--steps", str(steps))
    doc = assert_clean_and_audited(out, r, min_audits=2)
    if case == "eval_twin":  # the deque's first steps rise: growth audits judged it, and found it flat
        labels = [a["label"] for _, a, _, _ in audits_with_ledgers(out)]
        assert labels.count("growth") >= 3, labels
    assert doc["findings"] == []


def test_eval_loop_after_training_is_sampled_by_its_iterations(audited_run):
    """10 optimizer steps keeping nothing, then 20 eval batches keeping their
    logits: past max(8, twice the calls between steps) model calls without an
    optimizer step the iterations are the sample point, and the eval loop's
    list is found with its rate and line."""
    out, r = audited_run(SCRIPT, "train_then_eval", "--steps", "10")
    assert r.returncode == 0, r.stderr[-4000:]
    assert_every_ledger_adds_up(out)
    finding = one_growth(report(out))
    assert finding["holder"]["path"] == "__main__.kept", finding
    rate = finding["growth"]["bytes_per_step"]
    assert abs(rate - LOGITS) <= RATE_TOLERANCE * LOGITS, (rate, LOGITS)
    file, line = first_user_frame(finding["growth"]["created_at"])
    assert file.endswith(SCRIPT) and line == line_of(SCRIPT, "train_then_eval"), finding
    assert cli("gate", out).returncode == 1


GENERATION = "generation.py"


def kept_per_call(completed):
    (line,) = [ln for ln in completed.stdout.splitlines() if ln.startswith("kept_per_call ")]
    return int(line.split()[1])


@pytest.mark.parametrize("case", ["generate_function", "generate_while"])
def test_generate_loop_leak_has_its_rate_and_line(audited_run, case):
    out, r = audited_run(GENERATION, case, "--steps", "10")
    assert r.returncode == 0, r.stderr[-4000:]
    per_call = kept_per_call(r)
    audits = assert_every_ledger_adds_up(out)
    assert len([a for _, a, _, _ in audits if a["label"] == "growth"]) >= 3, audits
    doc = report(out)
    finding = one_growth(doc)
    assert finding["holder"]["path"] == "__main__.kept", finding  # the KV cache each output holds included
    assert_growth(finding, (1 - RATE_TOLERANCE) * per_call, (1 + RATE_TOLERANCE) * per_call, ["kept"], 10)
    file, line = first_user_frame(finding["growth"]["created_at"])
    assert file.endswith(GENERATION) and line == line_of(GENERATION, case), (file, line, finding)
    (run,) = doc["runs"]
    assert all(p.get("saw_optimizer") is False for p in run["audit_points"]), run["audit_points"]
    for _, audit, owners, _ in audits:
        # at the growth audit of call N (sampled at call N + 1's first forward) the list holds N outputs
        if audit["label"] == "growth" and any(o["owner_kind"] == "parameter" for o in owners):
            kept = [o for o in owners if o["owner_kind"] == "held" and o["owner"] == "__main__.kept"]
            assert kept and kept[0]["bytes"] == audit["step"] * per_call, (audit, owners)
    assert "MEMORY GROWTH" in verdict_line(r), r.stderr
    assert cli("gate", out).returncode == 1


@pytest.mark.parametrize("case", ["generate_long", "generate_twin"])
def test_generate_twin_reports_nothing(audited_run, case):
    out, r = audited_run(GENERATION, case, "--steps", "10")
    # one long call takes no growth sample (its tokens are one library call): only the exit audit
    doc = assert_clean_and_audited(out, r, min_audits=1 if case == "generate_long" else 2)
    labels = [a["label"] for _, a, _, _ in audits_with_ledgers(out)]
    if case == "generate_twin":  # the deque's first calls rise: growth audits judged it, and found it flat
        assert labels.count("growth") >= 3, labels
    else:
        assert "exit" in labels or "growth" in labels, labels
    assert doc["findings"] == []
