"""The README's account of resize_token_embeddings, checked against the
transformers installed (5.17 in requirements.lock): with an untied LM head
and with set_input_embeddings after the optimizer the run has stale
tensors; a tied GPT-2 resized in place is clean (an audit happened and
found nothing); the README shows the command and the verdict line as they
are.  Needs TPAUDIT_BUILD."""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

BUILD = Path(os.environ["TPAUDIT_BUILD"])
SRC = Path(__file__).resolve().parents[2]
TPAUDIT = str(BUILD / "bin" / "tpaudit")
EXAMPLE = SRC / "examples" / "resize_after_optimizer.py"


def audit(tmp_path, case):
    out = tmp_path / case
    r = subprocess.run([TPAUDIT, "run", "-o", str(out), "--", sys.executable, str(EXAMPLE), "--case", case],
                       capture_output=True, text=True, timeout=300, env=dict(os.environ, TPAUDIT_AUDIT="1"))
    assert r.returncode == 0, r.stderr
    report = subprocess.run([TPAUDIT, "report", "--format", "json", str(out)], capture_output=True, text=True,
                            timeout=120)
    verdict = [l for l in r.stderr.splitlines() if l.startswith("tpaudit: verdict:")]
    return json.loads(report.stdout), verdict[-1]


@pytest.mark.parametrize("case,name", [("lm-head", "lm_head.weight"), ("set-input", None)])
def test_a_new_parameter_after_the_optimizer_is_stale(tmp_path, case, name):
    doc, verdict = audit(tmp_path, case)
    stale = [f for f in doc["findings"] if f["kind"] == "stale_param"]
    assert stale and stale[0]["tensor"]["shape"] == [50257, 64], doc["findings"]
    if name:
        assert stale[0]["tensor"]["name"] == name
    assert verdict.startswith("tpaudit: verdict: STALE TENSORS")
    if case == "lm-head":  # the README shows this line as it is
        readme = (SRC / "README.md").read_text()
        assert "tpaudit run -- python examples/resize_after_optimizer.py --case lm-head\n" + verdict in readme


def test_a_tied_embedding_resized_in_place_is_clean(tmp_path):
    doc, verdict = audit(tmp_path, "tied")
    assert doc["findings"] == []
    assert re.match(r"tpaudit: verdict: clean: [1-9]\d* audits? in 1 process", verdict), verdict
