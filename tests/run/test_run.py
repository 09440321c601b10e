"""`tpaudit run` end to end: the child's signals (inherited ignores kept,
each signal forwarded once, a terminal Ctrl-C not sent twice, death by the
child's signal), the warning for programs the shim cannot be preloaded into,
an absolute TPAUDIT_OUT, the output directory rules (--output, --force, the lock), the
verdict and next command, -V and the suggestion on a mistyped command.
Needs TPAUDIT_BUILD and TPAUDIT_SIG_HOST; TPAUDIT_STATIC_HOST when this
machine can link statically."""
import fcntl
import os
import pty
import re
import select
import shutil
import signal
import sqlite3
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest

BUILD = Path(os.environ["TPAUDIT_BUILD"])
SRC = Path(__file__).resolve().parents[2]
TPAUDIT = str(BUILD / "bin" / "tpaudit")
SIG_HOST = os.environ["TPAUDIT_SIG_HOST"]
FINETUNE = SRC / "examples" / "finetune.py"


def tpaudit(*args, **kw):
    return subprocess.run([TPAUDIT, *map(str, args)], capture_output=True, text=True, timeout=120, **kw)


def tpaudit_lines(stderr):
    return [l for l in stderr.splitlines() if l.startswith("tpaudit:")]


def databases(out):
    return sorted(Path(out).glob("*.db"))


# ---- signals -------------------------------------------------------------

def ignoring(*sigs):
    def setup():
        for s in sigs:
            signal.signal(s, signal.SIG_IGN)
    return setup


def test_inherited_ignores_reach_the_child(tmp_path):
    plain = subprocess.run([SIG_HOST, "dispositions"], capture_output=True, text=True,
                           preexec_fn=ignoring(signal.SIGHUP, signal.SIGINT))
    r = tpaudit("run", "-o", tmp_path / "o", "--", SIG_HOST, "dispositions",
                preexec_fn=ignoring(signal.SIGHUP, signal.SIGINT))
    assert r.returncode == 0, r.stderr
    assert r.stdout == plain.stdout
    assert "HUP=ign" in r.stdout and "INT=ign" in r.stdout and "TERM=dfl" in r.stdout
    assert databases(tmp_path / "o"), "the host was audited"


def test_nohup_keeps_sighup_ignored(tmp_path):
    if not shutil.which("nohup"):
        pytest.skip("no nohup")
    r = subprocess.run(["nohup", TPAUDIT, "run", "-o", tmp_path / "o", "--", SIG_HOST, "dispositions"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "HUP=ign" in r.stdout
    # and SIGHUP sent to tpaudit under nohup changes nothing
    p = subprocess.Popen(["nohup", TPAUDIT, "run", "-o", tmp_path / "o2", "--", "sleep", "1"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(0.3)
    p.send_signal(signal.SIGHUP)
    assert p.wait(timeout=30) == 0


def start_counting(tmp_path, name, **kw):
    p = subprocess.Popen([TPAUDIT, "run", "-o", tmp_path / name, "--", SIG_HOST, "count", name],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)
    assert p.stdout.readline() == "ready\n"
    return p


@pytest.mark.parametrize("name", ["USR1", "USR2", "HUP", "TERM", "QUIT", "WINCH", "CONT", "ALRM"])
def test_signal_sent_to_tpaudit_reaches_the_child_once(tmp_path, name):
    p = start_counting(tmp_path, name)
    p.send_signal(getattr(signal, "SIG" + name))
    out, err = p.communicate(timeout=30)
    assert p.returncode == 0, err
    assert out == "got 1\n", (out, err)


def test_child_killed_by_a_signal_kills_tpaudit_by_the_same_signal(tmp_path):
    for sig in (signal.SIGTERM, signal.SIGKILL, signal.SIGUSR1):
        r = tpaudit("run", "-o", tmp_path / f"o{sig}", "--", "sh", "-c", f"kill -{sig.name[3:]} $$")
        assert r.returncode == -sig, (sig, r.returncode, r.stderr)
        assert any(l.startswith("tpaudit: verdict:") for l in tpaudit_lines(r.stderr)), r.stderr
    r = tpaudit("run", "-o", tmp_path / "exit3", "--", "sh", "-c", "exit 3")
    assert r.returncode == 3


def test_terminal_ctrl_c_reaches_the_child_once(tmp_path):
    """Ctrl-C on a terminal goes to the whole foreground process group, the
    child included: tpaudit must not send it a second time."""
    master, slave = pty.openpty()

    def own_terminal():
        os.setsid()
        fcntl.ioctl(slave, termios.TIOCSCTTY, 0)

    p = subprocess.Popen([TPAUDIT, "run", "-o", str(tmp_path / "o"), "--", SIG_HOST, "count", "INT"],
                         stdin=slave, stdout=slave, stderr=slave, preexec_fn=own_terminal)
    os.close(slave)
    seen = b""

    def read_until(token, limit=20):
        nonlocal seen
        end = time.time() + limit
        while token not in seen and time.time() < end:
            if select.select([master], [], [], 0.2)[0]:
                try:
                    seen += os.read(master, 4096)
                except OSError:
                    break
        return token in seen

    assert read_until(b"ready"), seen
    os.write(master, b"\x03")  # the terminal's VINTR
    assert read_until(b"tpaudit: next:"), seen
    assert p.wait(timeout=30) == 0
    os.close(master)
    assert b"got 1" in seen, seen


# ---- targets the shim cannot be preloaded into -----------------------------

def test_static_binary_is_reported(tmp_path):
    host = os.environ.get("TPAUDIT_STATIC_HOST")
    if not host:
        pytest.skip("this machine cannot link a static program (no static libc)")
    r = tpaudit("run", "-o", tmp_path / "o", "--", host)
    assert r.returncode == 0 and r.stdout == "static host ran\n"
    lines = tpaudit_lines(r.stderr)
    assert any("is statically linked" in l and "not audited" in l for l in lines), r.stderr
    assert any("nothing audited" in l for l in lines), r.stderr
    # found through PATH as well
    r = tpaudit("run", "-o", tmp_path / "p", "--", Path(host).name, env=dict(os.environ, PATH=str(Path(host).parent)))
    assert any("is statically linked" in l for l in tpaudit_lines(r.stderr)), r.stderr


def test_setuid_binary_is_reported(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("making a setuid copy owned by another user needs root")
    if os.statvfs(tmp_path).f_flag & os.ST_NOSUID:
        pytest.skip("the temporary directory is mounted nosuid")
    copy = tmp_path / "bin" / "sig_host"
    copy.parent.mkdir()
    shutil.copy(SIG_HOST, copy)
    os.chown(copy, 65534, -1)
    os.chmod(copy, 0o4755)
    os.chmod(tmp_path, 0o755)
    r = tpaudit("run", "-o", tmp_path / "o", "--", copy, "dispositions")
    assert r.returncode == 0 and "TERM=dfl" in r.stdout, r.stderr
    assert any("is setuid" in l and "not audited" in l for l in tpaudit_lines(r.stderr)), r.stderr
    assert not databases(tmp_path / "o")


def test_dynamic_program_gets_no_warning(tmp_path):
    r = tpaudit("run", "-o", tmp_path / "o", "--", SIG_HOST, "dispositions")
    assert r.returncode == 0
    assert not any("not audited" in l for l in tpaudit_lines(r.stderr)), r.stderr
    assert len(databases(tmp_path / "o")) == 1


# ---- output directory ----------------------------------------------------

def test_output_is_absolute_for_children_that_chdir(tmp_path):
    os.chdir(tmp_path)
    r = tpaudit("run", "-o", "rel", "--", "sh", "-c", 'echo "$TPAUDIT_OUT"; cd / && "$0" dispositions >/dev/null',
                SIG_HOST)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == str((tmp_path / "rel").resolve())
    assert len(databases(tmp_path / "rel")) == 1  # the host started from / wrote into it
    assert not (Path("/") / "rel").exists()


def test_output_long_form_and_missing_directory(tmp_path):
    assert tpaudit("run", "--output", tmp_path / "a", "--", SIG_HOST, "dispositions").returncode == 0
    assert databases(tmp_path / "a")
    assert tpaudit("run", f"--output={tmp_path / 'b'}", "--", SIG_HOST, "dispositions").returncode == 0
    assert databases(tmp_path / "b")
    for args in (["-o"], ["--output"], ["-o", ""], ["--bogus", "true"], []):
        r = tpaudit("run", *args)
        lines = r.stderr.strip().splitlines()
        assert r.returncode == 2 and len(lines) == 1 and lines[0].startswith("tpaudit: run:"), (args, r.stderr)
        assert "unknown option -o" not in r.stderr


def test_non_empty_output_is_refused_unless_force(tmp_path):
    out = tmp_path / "o"
    assert tpaudit("run", "-o", out, "--", SIG_HOST, "dispositions").returncode == 0
    (first,) = databases(out)
    (out / "notes.txt").write_text("mine")
    r = tpaudit("run", "-o", out, "--", SIG_HOST, "dispositions")
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and "not empty" in lines[0] and "--force" in lines[0], r.stderr
    assert databases(out) == [first], "nothing lost"
    r = tpaudit("run", "--force", "-o", out, "--", SIG_HOST, "dispositions")
    assert r.returncode == 0, r.stderr
    (second,) = databases(out)
    assert second != first and (out / "notes.txt").read_text() == "mine"
    # the default directory follows the same rule
    os.chdir(tmp_path)
    env = {k: v for k, v in os.environ.items() if k != "TPAUDIT_OUT"}
    assert tpaudit("run", "--", SIG_HOST, "dispositions", env=env).returncode == 0
    assert tpaudit("run", "--", SIG_HOST, "dispositions", env=env).returncode == 2
    assert len(databases(tmp_path / "tpaudit-out")) == 1


def held_run(out, marker):
    """A `tpaudit run` into `out` whose command (a shell, which records
    nothing) touches `marker`, then waits for a line on its stdin before it
    execs the host: until then `out` stays empty."""
    script = 'touch "$0" && read line && exec "$1" dispositions'
    return subprocess.Popen([TPAUDIT, "run", "-o", out, "--", "sh", "-c", script, marker, SIG_HOST],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def settle(runs, markers, limit=20):
    """Waits until every run has either started its command or ended."""
    end = time.monotonic() + limit
    while time.monotonic() < end:
        if all(r.poll() is not None or m.exists() for r, m in zip(runs, markers)):
            return
        time.sleep(0.02)
    raise AssertionError("the runs neither started nor ended")


def release(runs):
    results = []
    for r in runs:
        if r.poll() is None:
            r.stdin.write("go\n")
        out, err = r.communicate(timeout=60)
        results.append((r.returncode, out, err))
    return results


def assert_one_accepted(results, out):
    codes = sorted(rc for rc, _, _ in results)
    assert codes == [0, 2], [(rc, err) for rc, _, err in results]
    (refused,) = [err for rc, _, err in results if rc == 2]
    lines = tpaudit_lines(refused)
    assert len(lines) == 1 and "another tpaudit run" in lines[0] and str(out) in lines[0], refused
    (accepted,) = [err for rc, _, err in results if rc == 0]
    verdict = [l for l in tpaudit_lines(accepted) if "verdict:" in l]
    assert len(verdict) == 1 and re.search(r"\b1 process\b", verdict[0]), accepted
    assert len(databases(out)) == 1


def test_second_run_into_a_busy_directory_is_refused(tmp_path):
    # the first run has locked `out` but written nothing yet: the directory is
    # still empty, and only the lock refuses the second
    out = tmp_path / "o"
    first = held_run(out, tmp_path / "m1")
    settle([first], [tmp_path / "m1"])
    second = held_run(out, tmp_path / "m2")
    settle([first, second], [tmp_path / "m1", tmp_path / "m2"])
    assert_one_accepted(release([first, second]), out)
    assert release([held_run(out, tmp_path / "m3")])[0][0] == 2, "a later run still sees the databases"


def test_two_runs_started_at_once_into_one_directory(tmp_path):
    out = tmp_path / "o"
    markers = [tmp_path / "a", tmp_path / "b"]
    runs = [held_run(out, m) for m in markers]
    settle(runs, markers)
    assert_one_accepted(release(runs), out)


def test_nested_run_joins_the_outer_directory(tmp_path):
    out = tmp_path / "o"
    r = tpaudit("run", "-o", out, "--", TPAUDIT, "run", "--", SIG_HOST, "dispositions")
    assert r.returncode == 0, r.stderr
    assert len(databases(out)) == 1  # the host's (the inner tpaudit records nothing)
    assert sum("tpaudit: verdict:" in l for l in r.stderr.splitlines()) == 1


# ---- verdict, version, suggestions ------------------------------------------

@pytest.fixture(scope="module")
def seed_runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("seed")
    runs = {}
    for order in ("buggy", "fixed"):
        out = tmp / order
        r = tpaudit("run", "-o", out, "--", sys.executable, FINETUNE, "--order", order, "--steps", "2",
                    "--device", "cpu", env=dict(os.environ, TPAUDIT_AUDIT="1,2"))
        assert r.returncode == 0, r.stderr
        runs[order] = (out, r)
    return runs


def test_verdict_and_next_command_for_the_seed_bug(seed_runs):
    out, r = seed_runs["buggy"]
    lines = tpaudit_lines(r.stderr)
    assert re.match(r"tpaudit: verdict: STALE TENSORS: \d+ errors?, 12\.3 MiB retained by stale tensors \(1 process\)$",
                    lines[-2]), lines
    assert lines[-1] == f"tpaudit: next: tpaudit report {out}", lines
    report = tpaudit("report", out)
    assert "stale_param" in report.stdout


def test_verdict_clean_for_the_fixed_order(seed_runs):
    out, r = seed_runs["fixed"]
    lines = tpaudit_lines(r.stderr)
    assert re.match(r"tpaudit: verdict: clean: \d+ audits? in 1 process, no stale tensors$", lines[-2]), lines
    assert lines[-1] == f"tpaudit: next: tpaudit report {out}"


def test_version():
    for flag in ("-V", "--version"):
        r = tpaudit(flag)
        assert r.returncode == 0 and re.fullmatch(r"tpaudit \d+\.\d+\.\d+\n", r.stdout), r.stdout
    cmake = (SRC / "CMakeLists.txt").read_text()
    assert r.stdout.split()[1] in cmake


@pytest.mark.parametrize("typed,meant", [("reprot", "report"), ("gaet", "gate"), ("rnu", "run"),
                                         ("dif", "diff"), ("repo", "report")])
def test_mistyped_command_gets_a_suggestion(typed, meant):
    r = tpaudit(typed)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and lines[0].startswith("tpaudit:"), r.stderr
    assert f"did you mean {meant}?" in lines[0]


def test_unknown_command_without_a_near_one():
    r = tpaudit("frobnicate")
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and lines[0].startswith("tpaudit:") and "did you mean" not in r.stderr
