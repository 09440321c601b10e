"""The Python package as a user installs it: `pip install <clean copy>` into a
fresh venv, then the installed `tpaudit`, `python -m tpaudit`,
`import tpaudit; tpaudit.audit(...)` and the pytest plugin.

The fresh venv sees torch (and pytest) of the project venv through a .pth
file, so nothing large is downloaded; tpaudit itself comes only from
`pip install` of a copy of the checkout's files (tracked and new, not
ignored ones: no build trees).  pip fetches the build requirements
(scikit-build-core) from PyPI into its cache.  TPAUDIT_SOURCE_DIR names the
checkout.
"""
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import xml.etree.ElementTree as ET

import pytest

SOURCE = os.environ["TPAUDIT_SOURCE_DIR"]


def _clean_env(venv):
    """The user's environment: no shim preloaded, the venv first on PATH."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("TPAUDIT_") and k not in ("LD_PRELOAD", "PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = os.path.join(venv, "bin") + os.pathsep + env.get("PATH", "")
    return env


def _copy_checkout(dest):
    listed = subprocess.run(["git", "-C", SOURCE, "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            stdout=subprocess.PIPE, check=True).stdout.decode().split("\0")
    for rel in filter(None, listed):
        src = os.path.join(SOURCE, rel)
        if os.path.isfile(src):  # a tracked file deleted in the checkout is skipped
            os.makedirs(os.path.dirname(os.path.join(dest, rel)), exist_ok=True)
            shutil.copy2(src, os.path.join(dest, rel))


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(venv, copy of the checkout, env) after `pip install <copy>`."""
    root = tmp_path_factory.mktemp("package")
    copy, venv = str(root / "src"), str(root / "venv")
    _copy_checkout(copy)
    subprocess.run([sys.executable, "-m", "venv", venv], check=True)
    site = subprocess.run([os.path.join(venv, "bin", "python"), "-c",
                           "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          stdout=subprocess.PIPE, universal_newlines=True, check=True).stdout.strip()
    project_site = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    with open(os.path.join(site, "project-venv.pth"), "w") as f:
        f.write("\n".join(sorted(project_site)) + "\n")
    env = _clean_env(venv)
    pip = subprocess.run([os.path.join(venv, "bin", "pip"), "install", "--disable-pip-version-check",
                          "--no-input", copy], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         universal_newlines=True)
    assert pip.returncode == 0, "pip install failed:\n" + pip.stdout[-6000:]
    return venv, copy, env


def run(args, env, cwd, expect=0):
    done = subprocess.run(args, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True)
    assert done.returncode == expect, "%s exited %d, not %d:\n%s" % (args, done.returncode, expect, done.stdout)
    return done.stdout


def findings(env, cwd, path):
    report = json.loads(run(["tpaudit", "report", "--format", "json", path], env, cwd))
    return [(f["kind"], f["tensor"]["name"], f["tensor"]["shape"]) for f in report["findings"]]


def test_torch_is_not_a_dependency(installed):
    venv, _, env = installed
    meta = run([os.path.join(venv, "bin", "python"), "-c",
                "import importlib.metadata as m; print(m.requires('tpaudit'))"], env, venv)
    assert meta.strip() == "None"


def test_installed_cli_reports_the_seed_bug(installed, tmp_path):
    venv, copy, env = installed
    assert shutil.which("tpaudit", path=env["PATH"]) == os.path.join(venv, "bin", "tpaudit")
    out = str(tmp_path / "out")
    run(["tpaudit", "run", "-o", out, "--", "python", os.path.join(copy, "examples", "finetune.py")],
        env, str(tmp_path))
    assert ("stale_param", "wte.weight", [50257, 64]) in findings(env, str(tmp_path), out)
    gate = run(["tpaudit", "gate", "--max-retained", "0", out], env, str(tmp_path), expect=1)
    assert "FAIL max-retained" in gate


def test_python_m_tpaudit_runs_the_cli(installed, tmp_path):
    _, _, env = installed
    out = str(tmp_path / "out")
    said = run(["python", "-m", "tpaudit", "run", "-o", out, "--", "python", "-c", "print('hello')"],
               env, str(tmp_path))
    assert "hello" in said and "tpaudit: " in said  # the command's output, then run's last line
    assert "usage" in run(["python", "-m", "tpaudit", "gate", "--help"], env, str(tmp_path))


def test_shell_completions_land_where_the_shells_look(installed, tmp_path):
    """pip puts them under the environment's data root: bash-completion finds
    <env>/share/bash-completion/completions/tpaudit beside <env>/bin/tpaudit."""
    venv, copy, env = installed
    share = os.path.join(venv, "share")
    bash = os.path.join(share, "bash-completion", "completions", "tpaudit")
    with open(bash) as got, open(os.path.join(copy, "completions", "tpaudit.bash")) as want:
        assert got.read() == want.read()
    assert os.path.isfile(os.path.join(share, "zsh", "site-functions", "_tpaudit"))
    assert os.path.isfile(os.path.join(share, "fish", "vendor_completions.d", "tpaudit.fish"))
    said = run(["bash", "--norc", "--noprofile", "-c", 'source "%s"; complete -p tpaudit' % bash], env, str(tmp_path))
    assert said.strip() == "complete -F _tpaudit tpaudit"


AUDIT_ANYWHERE = """
import torch, tpaudit
from torch import nn
assert tpaudit.enable()  # hooks now: the names and stacks of what is built next
model = nn.Sequential(nn.Embedding(100, 8), nn.Linear(8, 4))
optimizer = torch.optim.AdamW(model.parameters())
model[0] = nn.Embedding(104, 8)
assert tpaudit.audit(label="user", models=[model], optimizers=[optimizer]) is not None
print(tpaudit.__file__)
"""


def test_import_tpaudit_audits_without_tpaudit_run(installed, tmp_path):
    venv, _, env = installed
    out = str(tmp_path / "out")
    where = run(["python", "-c", AUDIT_ANYWHERE], dict(env, TPAUDIT_OUT=out), str(tmp_path))
    assert where.strip().splitlines()[-1].startswith(venv)  # the last line: tpaudit.__file__
    assert ("stale_param", "0.weight", [100, 8]) in findings(env, str(tmp_path), out)


def pytest_session(installed, tmp_path, case_file, *options, launcher=()):
    """Runs the plugin cases in the venv; returns ({test: failure text or None}, output)."""
    _, copy, env = installed
    cases = os.path.join(copy, "tests", "package", "plugin_cases")
    junit = str(tmp_path / "junit.xml")
    output = run(list(launcher) + ["python", "-m", "pytest", "-p", "no:cacheprovider", "--junitxml", junit,
                                   case_file] + list(options), dict(env, TMPDIR=str(tmp_path)), cases, expect=1)
    results = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        failure = case.find("failure")
        results[case.get("name")] = None if failure is None else failure.get("message", "") + (failure.text or "")
    return results, output


@pytest.mark.parametrize("under_run", [False, True], ids=["plain", "under-tpaudit-run"])
def test_pytest_option_fails_exactly_the_buggy_test(installed, tmp_path, under_run):
    """Plain, the plugin loads the shim itself; under `tpaudit run` it uses the preloaded one."""
    dbs = str(tmp_path / "dbs")
    launcher = ["tpaudit", "run", "-o", dbs, "--"] if under_run else []
    options = ["--tpaudit"] if under_run else ["--tpaudit", "--tpaudit-out", dbs]
    results, output = pytest_session(installed, tmp_path, "cases_option.py", *options, launcher=launcher)
    assert results["test_clean"] is None
    text = results["test_buggy"]
    assert text is not None and "stale_param" in text and "[50257,8]" in text and "FAIL max-retained" in text
    assert "2 audited: 1 clean, 1 with stale tensors" in output  # the clean test was audited too
    assert "databases in " + dbs in output


def test_pytest_marker_audits_only_marked_tests(installed, tmp_path):
    results, output = pytest_session(installed, tmp_path, "cases_marker.py")
    assert results["test_marked[clean]"] is None and results["test_unmarked_buggy"] is None
    assert "stale_param" in results["test_marked[buggy]"]
    assert "2 audited: 1 clean, 1 with stale tensors" in output
