"""The OOM cases of the device run (tests/gpu/oom/gpu_oom_cases.py, run by
scripts/gpu_oom.sh on a GPU) checked in CI without one: each database the
device run made (committed as tests/analyzer/fixtures/oom/<case>.db) must
give the verdict, cause, holder, line and default gate exit that
tests/gpu/oom/oom_checks.py states for its case, as judge.py checks them
on the device.  Skips, with the reason, only while no fixture is
committed.  Needs TPAUDIT_BUILD (the build tree) in the environment."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
FIXTURES = HERE / "fixtures" / "oom"
TPAUDIT = str(Path(os.environ["TPAUDIT_BUILD"]) / "bin" / "tpaudit")
sys.path.insert(0, str(HERE.parents[0] / "gpu" / "oom"))
import oom_checks  # noqa: E402

COMMITTED = sorted(p.stem for p in FIXTURES.glob("*.db"))


def test_every_committed_fixture_is_a_known_case():
    if not COMMITTED:
        pytest.skip("no device-made OOM fixture committed yet under %s (scripts/gpu_oom.sh makes them)" % FIXTURES)
    assert set(COMMITTED) <= set(oom_checks.FIXTURE_CASES), COMMITTED


@pytest.mark.parametrize("case", oom_checks.FIXTURE_CASES)
def test_the_device_run_of_each_case_is_found_as_it_must_be(case):
    db = FIXTURES / (case + ".db")
    if not COMMITTED:
        pytest.skip("no device-made OOM fixture committed yet under %s (scripts/gpu_oom.sh makes them)" % FIXTURES)
    assert db.exists(), "%s: the device run's fixture is missing (scripts/gpu_oom.sh saves it)" % db.name
    r = subprocess.run([TPAUDIT, "report", "--format", "json", str(db)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    gate = subprocess.run([TPAUDIT, "gate", str(db)], capture_output=True, text=True, timeout=300).returncode
    failed = []
    oom_checks.check_case(case, doc, gate, lambda ok, what: ok or failed.append(what))
    assert not failed, failed
    assert doc["runs"][0]["audits"] >= 1  # audited
