"""memory_growth on plain torch (CPU), each leak pattern (in runs of 8 and 10
steps, the rate within 5% of the bytes it keeps a step) beside the twins
that must report nothing (in runs of 8 and 200 steps): scenarios/plain.py under `tpaudit run` with the default
audit plan, judged from the JSON report and the databases' ledgers; and a run
with a stale head and growth, whose verdict says both."""
import re
import shutil
import sqlite3
from pathlib import Path

import pytest

from leakrun import (STEPS, assert_clean_and_audited, assert_every_ledger_adds_up, assert_growth, assert_ledger_adds_up,
                     audits_with_ledgers, cli, first_user_frame, line_of, one_growth, report, verdict_line)
from plain import GRAPH_BYTES as GRAPH, HIDDEN_BYTES as HIDDEN, LOGITS_BYTES as LOGITS

SCRIPT = "plain.py"
RATE_TOLERANCE = 0.05  # the finding's bytes per step against the truth
SHORT = (8, 10)        # the runs a CI job or a smoke test makes
TWIN_STEPS = (8, 200)

# case: true bytes kept per step, words of the holder path, the `# made:` lines the user's frame may be
LEAKS = {
    "kept": (LOGITS, ["__main__.kept"], {"logits"}),
    "kept_output": (LOGITS, ["__main__.kept_logits"], {"logits"}),
    "hook": (HIDDEN, ["acts"], {"logits"}),
    "total_loss": (GRAPH, ["total_loss"], {"logits", "loss", "total_loss"}),
    "history": (LOGITS, ["history", "Trainer"], {"logits"}),
    "lru_cache": (LOGITS + 4, ["step_outputs"], {"logits"}),  # (logits, loss) per step
    "generator": (LOGITS, ["seen", "batches"], {"logits"}),
}
TWINS = ["argmax", "deque", "cleared", "accumulation", "eval", "ema", "warmup"]


@pytest.mark.parametrize("steps", SHORT)
@pytest.mark.parametrize("case", sorted(LEAKS))
def test_leak_is_found(audited_run, case, steps):
    truth, words, made = LEAKS[case]
    out, r = audited_run(SCRIPT, case, "--steps", str(steps))
    assert r.returncode == 0, r.stderr[-4000:]
    audits = assert_every_ledger_adds_up(out)
    assert len(audits) >= 3, audits  # audits happened: the default ones and the growth audits
    doc = report(out)
    finding = one_growth(doc)
    assert_growth(finding, (1 - RATE_TOLERANCE) * truth, (1 + RATE_TOLERANCE) * truth, words, steps)
    assert finding["holder"]["kind"] == "object", finding
    path = finding["holder"]["path"]
    file, line = first_user_frame(finding["growth"]["created_at"])
    assert file.endswith(SCRIPT) and line in {line_of(SCRIPT, m) for m in made}, (file, line)
    assert f"{SCRIPT}:{line}" in finding["message"], finding["message"]
    (run,) = doc["runs"]
    assert_ledger_adds_up(run)
    line = verdict_line(r)
    assert "MEMORY GROWTH" in line and "/step" in line, line


def test_finding_judged_at_exit_shows_its_creation_line(audited_run, tmp_path):
    """The 8-step `kept` loop returns before exit: its model and optimizer are
    gone at the exit audit, which is the one judged for growth.  With that
    audit's creation lines removed (as when it recorded none), the finding
    still shows the line, from the growth audit that recorded it, in the
    text, JSON and HTML."""
    out, _ = audited_run(SCRIPT, "kept", "--steps", "8")
    audits = audits_with_ledgers(out)
    last = audits[-1][1]
    assert last["label"] == "growth" and last["step"] == 8, audits
    copy = tmp_path / "copy"
    copy.mkdir()
    (db,) = Path(out).glob("*.db")
    shutil.copy(db, copy / db.name)
    con = sqlite3.connect(str(copy / db.name))
    con.execute("update ledger set created_at=NULL where audit_id=?", (last["id"],))
    con.commit()
    con.close()
    made = line_of(SCRIPT, "logits")
    finding = one_growth(report(copy))
    assert finding["step"] == 8 and finding["bytes"] == 8 * LOGITS, finding
    file, line = first_user_frame(finding["growth"]["created_at"])
    assert file.endswith(SCRIPT) and line == made, finding
    assert f"{SCRIPT}:{made}" in finding["message"], finding["message"]
    assert f"{SCRIPT}:{made}" in cli("report", copy).stdout
    assert f"{SCRIPT}:{made}" in cli("report", "--format", "html", copy).stdout


def test_kept_names_the_list_and_the_line_as_the_user_wrote_them(audited_run):
    out, r = audited_run(SCRIPT, "kept", "--steps", str(STEPS))
    finding = one_growth(report(out))
    assert finding["holder"]["path"] == "__main__.kept"
    made = line_of(SCRIPT, "logits")
    opening = r"`kept` \((\S*/)?%s:%d\) keeps a \[4,16,1024\] float32 tensor" % (re.escape(SCRIPT), made)
    assert re.match(opening, finding["message"]), finding["message"]
    assert "with its graph" in finding["message"] and "KiB/step" in finding["message"], finding["message"]
    assert "MEMORY GROWTH: `kept` +" in verdict_line(r)


@pytest.mark.parametrize("steps", TWIN_STEPS)
@pytest.mark.parametrize("case", TWINS)
def test_twin_reports_nothing(audited_run, case, steps):
    out, r = audited_run(SCRIPT, case, "--steps", str(steps))
    assert_clean_and_audited(out, r)


def test_stale_tensors_and_growth_are_both_said(audited_run):
    out, r = audited_run(SCRIPT, "kept_and_stale", "--steps", str(STEPS))
    assert r.returncode == 0, r.stderr[-4000:]
    doc = report(out)
    finding = one_growth(doc)
    assert finding["holder"]["path"] == "__main__.kept", finding
    stale = {f["tensor"]["name"] for f in doc["findings"] if f["kind"] == "stale_param"}
    assert stale == {"3.weight", "3.bias"}, doc["findings"]
    line = verdict_line(r)
    assert "MEMORY GROWTH: `kept` +" in line and "stale" in line, line
    assert_ledger_adds_up(doc["runs"][0])
    assert any(row["owner_kind"] == "stale" for row in doc["runs"][0]["ledger"]), doc["runs"][0]["ledger"]
