"""memory_growth on plain torch (CPU), each leak pattern beside the twins that
must report nothing: scenarios/plain.py under `tpaudit run` with the default
audit plan, judged from the JSON report and the databases' ledgers; and a run
with a stale head and growth, whose verdict says both."""
import re

import pytest

from leakrun import (STEPS, assert_clean_and_audited, assert_every_ledger_adds_up, assert_growth, assert_ledger_adds_up,
                     first_user_frame, line_of, one_growth, report, verdict_line)
from plain import HIDDEN_BYTES as HIDDEN, LOGITS_BYTES as LOGITS

SCRIPT = "plain.py"

# case: (bytes per step low, high), words of the holder path, the `# made:` lines the user's frame may be
LEAKS = {
    "kept": ((LOGITS, 1.05 * LOGITS), ["__main__.kept"], {"logits"}),
    "hook": ((HIDDEN, 1.05 * HIDDEN), ["acts"], {"logits"}),
    "total_loss": ((LOGITS, 4 * LOGITS), ["total_loss"], {"logits", "loss", "total_loss"}),
    "history": ((LOGITS, 1.05 * LOGITS), ["history", "Trainer"], {"logits"}),
    "lru_cache": ((LOGITS, 1.05 * LOGITS), ["step_outputs"], {"logits"}),
    "generator": ((LOGITS, 1.05 * LOGITS), ["seen", "batches"], {"logits"}),
}
TWINS = ["argmax", "deque", "cleared", "accumulation", "eval", "ema", "warmup"]


@pytest.mark.parametrize("case", sorted(LEAKS))
def test_leak_is_found(audited_run, case):
    (low, high), words, made = LEAKS[case]
    out, r = audited_run(SCRIPT, case, "--steps", str(STEPS))
    assert r.returncode == 0, r.stderr[-4000:]
    doc = report(out)
    finding = one_growth(doc)
    assert_growth(finding, low, high, words, STEPS)
    assert finding["holder"]["kind"] == "object", finding
    path = finding["holder"]["path"]
    file, line = first_user_frame(finding["growth"]["created_at"])
    assert file.endswith(SCRIPT) and line in {line_of(SCRIPT, m) for m in made}, (file, line)
    assert f"{SCRIPT}:{line}" in finding["message"], finding["message"]
    (run,) = doc["runs"]
    assert_ledger_adds_up(run)
    held = [row for row in run["ledger"] if row["owner"] == path]
    assert held and abs(held[0]["bytes"] - finding["bytes"]) <= 0.01 * finding["bytes"], (path, run["ledger"])
    assert_every_ledger_adds_up(out)
    line = verdict_line(r)
    assert "MEMORY GROWTH" in line and "/step" in line, line


def test_kept_names_the_list_and_the_line_as_the_user_wrote_them(audited_run):
    out, r = audited_run(SCRIPT, "kept", "--steps", str(STEPS))
    finding = one_growth(report(out))
    assert finding["holder"]["path"] == "__main__.kept"
    made = line_of(SCRIPT, "logits")
    opening = r"`kept` \((\S*/)?%s:%d\) keeps a \[4,16,1024\] float32 tensor" % (re.escape(SCRIPT), made)
    assert re.match(opening, finding["message"]), finding["message"]
    assert "with its graph" in finding["message"] and "KiB/step" in finding["message"], finding["message"]
    assert "MEMORY GROWTH: `kept` +" in verdict_line(r)


@pytest.mark.parametrize("case", TWINS)
def test_twin_reports_nothing(audited_run, case):
    out, r = audited_run(SCRIPT, case, "--steps", str(STEPS))
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
