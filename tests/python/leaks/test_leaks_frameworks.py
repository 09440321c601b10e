"""memory_growth where users train, on the CPU: transformers' Trainer with a
callback that keeps outputs, a Lightning module that appends its outputs,
and two gloo ranks of which one leaks (scenarios/frameworks.py), each beside
a twin that must report nothing."""
import pytest

from leakrun import (STEPS, assert_clean_and_audited, assert_every_ledger_adds_up, assert_growth, assert_ledger_adds_up,
                     cli, first_user_frame, frames, growth, line_of, one_growth, report, scenario, verdict_line)
from frameworks import LOGITS_BYTES as LOGITS

SCRIPT = "frameworks.py"


def framework_run(tmp_path, case, *args, ranks=0):
    out, r = scenario(tmp_path, SCRIPT, case, "--steps", str(STEPS), "--workdir", str(tmp_path), *args,
                      ranks=ranks, name=case + "".join(args))
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-4000:]
    return out, r


def test_hf_trainer_callback_keeping_outputs(tmp_path):
    out, r = framework_run(tmp_path, "hf_trainer")
    doc = report(out)
    finding = one_growth(doc)
    assert_growth(finding, LOGITS, 1.05 * LOGITS, ["outputs", "logits"], STEPS)
    assert any(file.endswith(SCRIPT) for file, _ in frames(finding["growth"]["created_at"])), finding
    (trained,) = [proc for proc in doc["runs"] if proc["audits"]]
    assert_ledger_adds_up(trained)
    assert_every_ledger_adds_up(out)
    assert "MEMORY GROWTH" in verdict_line(r)


def test_hf_trainer_callback_keeping_argmax_is_clean(tmp_path):
    assert_clean_and_audited(*framework_run(tmp_path, "hf_trainer", "--twin"))


def test_lightning_module_appending_outputs(tmp_path):
    out, _ = framework_run(tmp_path, "lightning")
    doc = report(out)
    found = growth(doc)
    paths = [f["holder"]["path"] for f in found]
    trains = [f for f in found if "train_outputs" in f["holder"]["path"]]
    assert len(trains) == 1, paths  # val_outputs grows too (every 4th step): a finding of its own if any
    train = trains[0]
    assert_growth(train, LOGITS, 2 * LOGITS, ["train_outputs"], STEPS)
    assert all(f["severity"] == "error" for f in found), found
    (trained,) = [proc for proc in doc["runs"] if proc["audits"]]
    assert_ledger_adds_up(trained)
    assert_every_ledger_adds_up(out)


def test_lightning_module_clearing_its_outputs_is_clean(tmp_path):
    assert_clean_and_audited(*framework_run(tmp_path, "lightning", "--twin"))


def test_two_gloo_ranks_the_finding_names_the_leaking_rank(tmp_path):
    out, r = framework_run(tmp_path, "ranks", ranks=2)
    doc = report(out)
    finding = one_growth(doc)
    assert finding["rank"] == 1 and growth(doc, rank=0) == [], doc["findings"]
    assert_growth(finding, LOGITS, 1.05 * LOGITS, ["kept"], STEPS)
    file, line = first_user_frame(finding["growth"]["created_at"])
    assert file.endswith(SCRIPT) and line == line_of(SCRIPT, "rank_logits"), (file, line)
    ranked = {proc["rank"]: proc for proc in doc["runs"] if proc["rank"] is not None}
    assert set(ranked) == {0, 1} and all(proc["audits"] >= 2 for proc in ranked.values()), doc["runs"]
    for proc in ranked.values():
        assert_ledger_adds_up(proc)
    assert_every_ledger_adds_up(out)
    text = cli("report", out).stdout
    assert any("rank 1" in line and "memory_growth" in line and "kept" in line for line in text.splitlines()), text
    assert not any("rank 0" in line and "memory_growth" in line for line in text.splitlines()), text
    assert "MEMORY GROWTH" in verdict_line(r)
