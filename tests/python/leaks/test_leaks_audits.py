"""memory_growth at every audit the run took, `--fail-fast` on growth, and
`tpaudit gate --max-growth`: the `kept` leak of scenarios/plain.py (one
[4,16,1024] float32 logits tensor a step) beside its argmax twin."""
import pytest

from leakrun import (KIND, STEPS, assert_clean_and_audited, assert_every_ledger_adds_up, audits_with_ledgers, cli,
                     one_growth, report, scenario, tpaudit_lines)
from plain import LOGITS_BYTES as LOGITS

LONG = 64  # fail-fast must stop well before this


@pytest.fixture
def kept_run(audited_run):
    return audited_run("plain.py", "kept", "--steps", str(STEPS))


@pytest.fixture
def twin_run(audited_run):
    return audited_run("plain.py", "argmax", "--steps", str(STEPS))


def test_every_audit_holds_what_the_list_held_at_that_step(kept_run):
    out, r = kept_run
    assert r.returncode == 0, r.stderr[-4000:]
    audits = assert_every_ledger_adds_up(out)
    doc = report(out)
    (run,) = doc["runs"]
    assert [p["step"] for p in run["audit_points"]] == [a["step"] for _, a, _, _ in audits]
    assert [a["step"] for _, a, _, _ in audits][:2] == [1, 2]  # the default plan's audits happened
    growth_audits = [a for _, a, _, _ in audits if a["label"] == "growth"]
    assert len(growth_audits) >= 2, audits  # growth is proven by two audits after warm-up
    for _, audit, owners, _ in audits:
        step = STEPS if audit["step"] == -1 else audit["step"]
        rows = [o for o in owners if o["owner"] == "__main__.kept"]
        if audit["label"] == "growth" and owners:
            assert rows, (audit, owners)  # the holder walk ran at each growth audit
        if audit["label"] == "growth" and any(o["owner_kind"] == "parameter" for o in owners):
            # inside the loop (the model alive) the walk names an owner for every tensor
            left = sum(o["bytes"] for o in owners if o["owner_kind"] == "unattributed")
            assert left <= 0.01 * sum(o["bytes"] for o in owners), (audit, owners)
        for row in rows:
            # At step N's audit the list holds N logits; the newest is also the loop's local `logits`, a root
            # of its own, which owns it in a step's audit (N - 1 left to the list); at exit the list owns all N.
            assert row["owner_kind"] == "held" and row["tensors"] in (step - 1, step), (audit, row)
            assert row["bytes"] == row["tensors"] * LOGITS, (audit, row)
    finding = one_growth(doc)
    judged = [a for _, a, _, _ in audits if a["step"] == finding["step"]]
    assert judged and judged[-1]["label"] in ("growth", "exit"), (finding["step"], audits)


def test_warm_up_audits_have_no_verdict_and_fail_fast_stops_at_the_first_proof(tmp_path):
    out, r = scenario(tmp_path, "plain.py", "kept", "--steps", str(LONG), fail_fast=True)
    assert r.returncode == 4, r.stderr[-4000:]
    assert "done kept" not in r.stdout  # stopped inside the loop
    lines = [line for line in tpaudit_lines(r.stderr) if ": memory_growth:" in line]
    assert len(lines) == 1 and lines[0].startswith("tpaudit: at step "), r.stderr
    assert lines[0].endswith("; stopping the run (fail-fast, exit status 4)"), lines[0]
    stop = int(lines[0].split("at step ", 1)[1].split(":", 1)[0])
    audits = audits_with_ledgers(out)
    steps = [a["step"] for _, a, _, _ in audits]
    assert steps[-1] == stop < LONG and steps[:2] == [1, 2], steps  # steps 1, 2 and the first growth audit passed
    assert sum(a["label"] == "growth" for _, a, _, _ in audits) >= 2, audits
    assert_every_ledger_adds_up(out)
    doc = report(out)
    (run,) = doc["runs"]
    assert run["complete"] and len(run["audit_points"]) == len(audits), run
    finding = one_growth(doc)
    assert finding["step"] == stop and finding["holder"]["path"] == "__main__.kept", finding


def test_fail_fast_leaves_the_twin_alone(tmp_path):
    out, r = scenario(tmp_path, "plain.py", "argmax", "--steps", str(LONG), fail_fast=True)
    assert "done argmax" in r.stdout
    assert_clean_and_audited(out, r)


def test_gate_judges_bytes_per_step(kept_run):
    out, _ = kept_run
    default = cli("gate", out)
    assert default.returncode == 1, default.stdout + default.stderr  # an error finding fails the default gate
    below = cli("gate", "--max-growth", "64KiB", out)
    assert below.returncode == 1 and "max-growth" in below.stdout, below.stdout + below.stderr
    above = cli("gate", "--max-growth", "1MiB", out)  # the list grows 256 KiB a step
    assert above.returncode == 0 and "max-growth" in above.stdout, above.stdout + above.stderr
    junit = cli("gate", "--max-growth", "64KiB", "--format", "junit", out)
    assert junit.returncode == 1 and KIND in junit.stdout and "max-growth" in junit.stdout, junit.stdout


def test_gate_passes_the_twin(twin_run):
    out, r = twin_run
    assert_clean_and_audited(out, r)
    assert cli("gate", "--max-growth", "0", out).returncode == 0


@pytest.mark.parametrize("bad", ["abc", "-1MiB", "12XB", ""])
def test_bad_max_growth_is_one_line_and_exit_2(twin_run, bad):
    out, _ = twin_run
    r = cli("gate", "--max-growth", bad, out)
    assert r.returncode == 2, r.stdout + r.stderr
    assert len(tpaudit_lines(r.stderr)) == 1 and r.stdout == "", r.stderr


def test_text_and_html_reports_show_the_ledger_and_the_growth(kept_run):
    out, _ = kept_run
    text = cli("report", out).stdout
    assert KIND in text and "__main__.kept" in text and "ledger" in text.lower(), text
    html = cli("report", "--format", "html", out).stdout
    assert "MEMORY GROWTH" in html and "__main__.kept" in html and "ledger" in html.lower()
