"""The pytest plugin from the build tree (no pip install): what a failed
test shows and what a session leaves behind.  A test judged at its own
audit is not called inconclusive and has no 'step -1'; its stacks start at
the test function (no pytest or pluggy frames); the temporary database
directory is gone once pytest has exited, and --tpaudit-out keeps its
directory.  Needs TPAUDIT_BUILD."""
import os
import re
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

BUILD = Path(os.environ["TPAUDIT_BUILD"])
CASES = Path(__file__).resolve().parent / "plugin_cases"


@pytest.fixture(scope="module")
def prefix(tmp_path_factory):
    """The build's probe package in a prefix of its own (bin and lib link to the
    build), without the build's sitecustomize: the plugin loads the shim itself."""
    root = tmp_path_factory.mktemp("prefix")
    shutil.copytree(BUILD / "share" / "tpaudit" / "python" / "tpaudit", root / "share" / "tpaudit" / "python" / "tpaudit")
    (root / "lib").symlink_to(BUILD / "lib")
    (root / "bin").symlink_to(BUILD / "bin")
    return root


def session(prefix, tmp_path, *options, cases_file="cases_option.py"):
    """Runs a cases file under pytest with the plugin; (failures by test, stdout, TMPDIR)."""
    cases, tmp = tmp_path / "cases", tmp_path / "tmp"
    shutil.copytree(CASES, cases)
    tmp.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("TPAUDIT_") and k not in ("LD_PRELOAD",)}
    env.update(PYTHONPATH=str(prefix / "share" / "tpaudit" / "python"), TMPDIR=str(tmp))
    junit = tmp_path / "junit.xml"
    r = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "tpaudit.pytest_plugin",
                        "--junitxml", str(junit), cases_file, *options], cwd=cases, env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
    assert r.returncode == 1, r.stdout
    failures = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        failure = case.find("failure")
        failures[case.get("name")] = None if failure is None else failure.get("message", "") + (failure.text or "")
    return failures, r.stdout, tmp


def section(stdout, title):
    """The lines of a captured section (`--- title ---`) in pytest's failure output."""
    m = re.search(r"^-+ %s -+\n(.*?)(?=^[-=_]{5,})" % re.escape(title), stdout, re.S | re.M)
    assert m, stdout
    return m.group(1)


def test_failure_text_is_about_the_judged_test(prefix, tmp_path):
    failures, stdout, _ = session(prefix, tmp_path, "--tpaudit")
    assert failures["test_clean"] is None
    text = failures["test_buggy"]
    assert "stale_param" in text and "FAIL max-retained" in text, text
    report = section(stdout, "tpaudit report")
    for said in (text, report):
        assert "INCONCLUSIVE" not in said and "step -1" not in said, said
        assert "_pytest" not in said and "pluggy" not in said, said
    assert 'audit "test cases_option.py::test_buggy"' in report, report
    # every stack starts at the test function, outermost first
    stacks = re.findall(r"\(most recent call last\):\n(        \S.*)", report)
    assert stacks and all(first.strip().startswith("cases_option.py:") and first.endswith(" in test_buggy")
                          for first in stacks), report


def gone(path, seconds=20):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if not list(path.glob("tpaudit-pytest-*")):
            return True
        time.sleep(0.1)
    return False


def test_temporary_databases_are_removed_after_the_session(prefix, tmp_path):
    _, stdout, tmp = session(prefix, tmp_path, "--tpaudit")
    assert "databases removed at exit" in stdout, stdout
    assert gone(tmp), list(tmp.iterdir())


def test_tpaudit_out_keeps_its_databases(prefix, tmp_path):
    out = tmp_path / "dbs"
    _, stdout, tmp = session(prefix, tmp_path, "--tpaudit", "--tpaudit-out", str(out))
    assert "databases in %s" % out in stdout, stdout
    time.sleep(1)
    assert list(out.glob("*.db")) and not list(tmp.glob("tpaudit-pytest-*"))


def test_growth_limit_fails_the_leaking_loop_and_passes_its_twin(prefix, tmp_path):
    failures, stdout, _ = session(prefix, tmp_path, "--tpaudit", "--tpaudit-max-growth", "64KiB", "-rA",
                                  cases_file="cases_growth.py")
    assert failures["test_bounded_twin"] is None, failures
    assert failures["test_leak_under_the_marker_limit"] is None, failures  # 256 KiB/step is under its 1 MiB
    text = failures["test_leaking_loop"]
    assert text and "memory grows step over step in cases_growth.py::test_leaking_loop" in text, text
    assert "stale tensors" not in text.split("\n", 1)[0], text
    assert "memory_growth" in text and "FAIL max-growth" in text and "256.0 KiB/step" in text, text
    assert "MEMORY GROWTH cases_growth.py::test_leaking_loop" in stdout, stdout
    assert "with memory growth" in stdout and "STALE TENSORS cases_growth" not in stdout, stdout
    report = section(stdout, "tpaudit report")
    assert "cases_growth.kept" in report, report


def test_growth_limit_fails_an_hf_model_leak_wherever_its_list_lives(prefix, tmp_path):
    """GPT-2 trained 30 steps keeping 16 MiB of logits a step, under
    max_growth="1MiB": in the test body, in a helper whose optimizer is gone
    at the test's end (no "without an optimizer" pass), in a fixture; each
    bounded twin passes."""
    failures, stdout, _ = session(prefix, tmp_path, "-rA", cases_file="cases_growth_hf.py")
    for place in ("body", "helper", "fixture"):
        assert failures["test_%s_twin" % place] is None, failures
        text = failures["test_%s_keeps_logits" % place]
        assert text and "memory grows step over step in cases_growth_hf.py::test_%s_keeps_logits" % place in text, text
        assert "FAIL max-growth" in text and "16.0 MiB/step" in text, text
        assert "MEMORY GROWTH cases_growth_hf.py::test_%s_keeps_logits" % place in stdout, stdout
    assert "3 with memory growth" in stdout, stdout
    report = section(stdout, "tpaudit report")
    made = {m: n + 1 for n, line in enumerate((CASES / "cases_growth_hf.py").read_text().splitlines())
            for m in ("body", "helper") if line.rstrip().endswith("# made:" + m)}
    assert "cases_growth_hf.py:%d" % made["body"] in report, report
