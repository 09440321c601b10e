#!/usr/bin/env python3
"""hostile_run.py - one hostile-host case: runs a host program without and
with the shim (LD_PRELOAD, TPAUDIT_OUT in a fresh directory) and asserts the
host cannot tell: same exit status (or death by the same signal), same
stdout, same stderr once `tpaudit:` lines are set aside, same files in its
working directory.  A host that does not end within the limit fails the
case.  Then the case's own check on the databases.

usage: hostile_run.py CASE SHIM BINDIR [PYTHON]
"""
import glob
import os
import re
import resource
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile

LIMIT_S = 30


class Fail(Exception):
    pass


class Skip(Exception):
    """The case cannot be set up on this machine (ctest SKIP_RETURN_CODE 77)."""


def check(cond, what):
    if not cond:
        raise Fail(what)


def snapshot(root, skip):
    files = {}
    for dirpath, dirnames, filenames in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        dirnames[:] = [d for d in dirnames if os.path.normpath(os.path.join(rel, d)) not in skip]
        files[rel + "/"] = None
        for f in filenames:
            p = os.path.join(dirpath, f)
            with open(p, "rb") as fh:
                files[os.path.normpath(os.path.join(rel, f))] = fh.read()
    return files


def run_host(argv, cwd, env, limits=(), plant=None, limit_s=LIMIT_S):
    """Returns (status, stdout, stderr); status is the exit code or -signal."""
    def before_exec():
        for res, value in limits:
            resource.setrlimit(res, (value, value))
        if plant:
            plant(os.getpid())
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        p = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                             preexec_fn=before_exec, start_new_session=True)
        try:
            status = p.wait(timeout=limit_s)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
            raise Fail(f"{argv[0]} did not end within {limit_s} s (hang)")
        out.seek(0)
        err.seek(0)
        return status, out.read().decode(errors="replace"), err.read().decode(errors="replace")


def split_err(err):
    """The shim's lines (less the Python probe's own notice) and the rest."""
    ours = [ln for ln in err.splitlines() if ln.startswith("tpaudit: ") and "python ownership probe" not in ln]
    rest = [ln for ln in err.splitlines() if not ln.startswith("tpaudit: ")]
    return ours, rest


def twin_runs(work, argv, shim, limits=(), plant=None, default_out=False, max_lines=0, limit_s=LIMIT_S):
    """Runs argv in two fresh directories, without and with the shim;
    returns the shim run's output directory and its tpaudit: lines."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("TPAUDIT_") and k != "LD_PRELOAD"}
    results = []
    out_dir = os.path.join(work, "out")
    for with_shim in (False, True):
        cwd = os.path.join(work, "shim" if with_shim else "plain")
        os.makedirs(cwd, exist_ok=True)  # a case may have mounted a file system there
        env = dict(base)
        if with_shim:
            env["LD_PRELOAD"] = shim
            if default_out:
                out_dir = os.path.join(cwd, "tpaudit-out")
            else:
                env["TPAUDIT_OUT"] = out_dir
        status, out, err = run_host(argv, cwd, env, limits, plant if with_shim else None, limit_s)
        results.append((status, out, err, snapshot(cwd, {"tpaudit-out"})))
    (s0, o0, e0, f0), (s1, o1, e1, f1) = results
    ours, rest = split_err(e1)
    check(s0 == s1, f"exit status {s0} without the shim, {s1} with it; stderr: {e1[-2000:]}")
    check(o0 == o1, f"stdout differs:\n--- without\n{o0[-2000:]}\n--- with\n{o1[-2000:]}")
    check(split_err(e0)[1] == rest, f"stderr differs:\n--- without\n{e0[-2000:]}\n--- with\n{e1[-2000:]}")
    check(f0 == f1, f"the host's files differ: {sorted(set(f0) ^ set(f1)) or 'contents'}")
    check(len(ours) <= max_lines, f"want at most {max_lines} tpaudit: lines, got: {ours}")
    return out_dir, ours, s1


def dbs(out_dir):
    return sorted(glob.glob(os.path.join(out_dir, "*.db")))


def q(db, sql):
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def run_row(db):
    names = [r[1] for r in q(db, "pragma table_info(run)")]
    ended = "ended_by" if "ended_by" in names else "null"
    cols = f"complete, exit_status, {ended}, end_ns is not null, dropped_events"
    return q(db, f"select {cols} from run")[0]


def no_half_made_files(out_dir):
    if os.path.isdir(out_dir):
        left = [f for f in os.listdir(out_dir) if not os.path.islink(os.path.join(out_dir, f))]
        check(not left, f"files left after the shim turned off: {left}")


def host_name():
    return re.sub(r"[^A-Za-z0-9._-]", "_", socket.gethostname())


def case_fork_sqlite(work, shim, bindir, py):
    out, _, _ = twin_runs(work, [os.path.join(bindir, "host_fork_sqlite")], shim)
    check(len(dbs(out)) == 7, f"want the parent's and 6 recording children's databases, got {len(dbs(out))}")
    ends = sorted(run_row(db)[:3] for db in dbs(out))
    check(ends == [(1, 0, "_exit")] * 6 + [(1, 0, "exit")], f"run rows {ends}")


def case_fork_sqlite_py(work, shim, bindir, py):
    out, _, _ = twin_runs(work, [py, os.path.join(HERE, "host_fork_sqlite.py")], shim)
    check(not dbs(out), f"processes that record nothing leave no database; got {dbs(out)}")


def case_closefds(work, shim, bindir, py):
    out, lines, _ = twin_runs(work, [os.path.join(bindir, "host_closefds")], shim, max_lines=1)
    check(len(lines) == 1 and "closed or replaced by the host" in lines[0], f"want the lost-fd line: {lines}")
    (db,) = dbs(out)
    check(q(db, "pragma integrity_check") == [("ok",)], "integrity")
    check(run_row(db)[0] == 0, "a run whose descriptors were lost is not complete")
    check(q(db, "select count(*) from event")[0][0] == 100, "the events before the close are kept")


def case_sigint_py(work, shim, bindir, py):
    out, _, status = twin_runs(work, [py, os.path.join(HERE, "host_sigint.py")], shim)
    check(status == 5, f"KeyboardInterrupt handler must exit 5, got {status}")
    (db,) = dbs(out)
    check(run_row(db)[:3] == (1, 5, "exit"), f"run {run_row(db)}")


def exec_chain(work, shim, bindir, depth, end, want_status, want_end):
    out, _, _ = twin_runs(work, [os.path.join(bindir, "host_exec"), str(depth), end], shim)
    found = dbs(out)
    check(len(found) == depth + 1, f"want {depth + 1} databases, got {len(found)}")
    ends = []
    for db in found:
        r = run_row(db)
        audits = q(db, "select count(*), count(end_ns) from audit")[0]
        check(audits == (1, 1), f"{db}: the audit before the exec was lost: {audits}")
        check(q(db, "select count(*) from tensor")[0][0] == 1, f"{db}: tensor lost")
        check(r[0] == 1 and r[3] == 1, f"{db}: not ended cleanly: {r}")
        ends.append((r[1], r[2]))
    check(ends.count((None, "exec")) == depth, f"want {depth} images ended by exec: {ends}")
    check(ends.count((want_status, want_end)) == 1, f"want the last ended by {want_end}: {ends}")


def case_exec(work, shim, bindir, py):
    exec_chain(work, shim, bindir, 20, "exit", 3, "exit")


def case_exec_exit(work, shim, bindir, py):
    exec_chain(work, shim, bindir, 3, "_exit", 3, "_exit")


def check_exit_threads(work, shim, bindir):
    # no time in the check: the final run row is written however slowly the
    # writer gets the CPU (hostile_life.py's exit_threads_loaded runs it loaded);
    # the end's speed is bench/shim_lifecycle.c's figure
    out, _, _ = twin_runs(work, [os.path.join(bindir, "host_exit_threads")], shim)
    (db,) = dbs(out)
    complete, status, ended, has_end, dropped = run_row(db)
    check((status, ended, has_end) == (0, "exit", 1), f"final run row missing: {run_row(db)}")
    check(complete == 1 or dropped > 0, f"an incomplete end must count what it dropped: {run_row(db)}")
    check(q(db, "pragma integrity_check") == [("ok",)], "integrity")


def case_exit_threads(work, shim, bindir, py):
    check_exit_threads(work, shim, bindir)


def case_fork_exec(work, shim, bindir, py):
    out, _, _ = twin_runs(work, [os.path.join(bindir, "host_fork_exec")], shim)
    check(len(dbs(out)) == 1, f"only the recording parent leaves a database, got {len(dbs(out))}")
    check(run_row(dbs(out)[0])[:3] == (1, 0, "exit"), "parent run row")


def case_exec_wrappers(work, shim, bindir, py):
    host = os.path.join(bindir, "host_exec")
    argv = ["env", "X=1", "nice", "sh", "-c", f"exec '{host}' 0 exit"]
    out, _, _ = twin_runs(work, argv, shim)
    (db,) = dbs(out)
    check(q(db, "select count(*) from audit")[0][0] == 1, "the host's audit")


def limits_case(work, shim, bindir, limits, mode, plant=None):
    out, lines, _ = twin_runs(work, [os.path.join(bindir, "host_limits"), mode], shim, limits, plant, max_lines=1)
    for db in dbs(out):
        check(os.path.getsize(db) > 0, f"0-byte database {db}")
    if lines:
        check("disabled" in lines[0], f"a limit turns the shim off: {lines}")
        no_half_made_files(out)
    return out, lines


def case_nofile8(work, shim, bindir, py):
    limits_case(work, shim, bindir, [(resource.RLIMIT_NOFILE, 8)], "files")


def case_nofile4(work, shim, bindir, py):
    limits_case(work, shim, bindir, [(resource.RLIMIT_NOFILE, 4)], "files")


def case_rlimit_as(work, shim, bindir, py):
    for mib in (20, 24, 32):
        sub = os.path.join(work, str(mib))
        os.makedirs(sub)
        limits_case(sub, shim, bindir, [(resource.RLIMIT_AS, mib << 20)], "memory")


def case_shm_symlink(work, shim, bindir, py):
    out = os.path.join(work, "out")
    os.makedirs(out)
    victim = os.path.join(work, "victim")
    with open(victim, "w") as f:
        f.write("victim\n")

    def plant(pid):
        os.symlink(victim, os.path.join(out, f"tpaudit-{host_name()}-{pid}.db-shm"))
    _, lines = limits_case(work, shim, bindir, [], "files", plant)
    with open(victim) as f:
        check(f.read() == "victim\n", "the victim file changed")
    for db in dbs(out):
        check(os.path.getsize(db) > 0, "0-byte database")


def case_chdir_fork(work, shim, bindir, py):
    out, _, _ = twin_runs(work, [os.path.join(bindir, "host_chdir_fork")], shim, default_out=True)
    check(len(dbs(out)) == 2, f"want parent and child databases in the start directory, got {dbs(out)}")
    check(not os.path.exists(os.path.join(work, "shim", "sub", "tpaudit-out")), "the child wrote below sub/")


def case_stderr_reuse(work, shim, bindir, py):
    out, _, _ = twin_runs(work, [os.path.join(bindir, "host_stderr_reuse")], shim)
    (db,) = dbs(out)
    check(q(db, "pragma integrity_check") == [("ok",)], "integrity")
    check(run_row(db)[0] == 0, "a run whose descriptors were lost is not complete")
    check(q(db, "select count(*) from event")[0][0] == 100, "the events before the close are kept")


SMALL_FS_MIB = 40


def in_namespace_or_rerun(name, shim, bindir, py, script=__file__):
    """Re-runs case `name` of `script` inside a new user and mount namespace
    (unshare -Urm), where it may mount a small tmpfs; returns False when
    this is the inner run.  Skip when no namespace can be made here."""
    if os.environ.get("TPAUDIT_HOSTILE_NS") == "1":
        return False
    unshare = shutil.which("unshare")
    if not unshare:
        raise Skip("no unshare(1): cannot make a small file system without root")
    r = subprocess.run([unshare, "-Urm", sys.executable, os.path.abspath(script), name, shim, bindir, py],
                       env=dict(os.environ, TPAUDIT_HOSTILE_NS="1"), capture_output=True, text=True)
    sys.stderr.write(r.stderr)
    if r.returncode == 0 and f"PASS: {name}" in r.stdout:
        return True
    if r.returncode == 77 or not re.search(r"^(PASS|FAIL|SKIP)", r.stdout + r.stderr, re.M):
        raise Skip(f"cannot make a user and mount namespace here (unshare -Urm: {r.stderr.strip()[-300:]})")
    raise Fail("the case failed inside its namespace (above)")


def mount_small_fs(path):
    os.makedirs(path)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={SMALL_FS_MIB}m", "tmpfs", path],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise Skip(f"cannot mount a {SMALL_FS_MIB} MiB tmpfs: {r.stderr.strip()}")


def on_small_fs(name, work, shim, bindir, py, host_args, then):
    """Runs host_disk_full HOST_ARGS without and with the shim, each run on
    its own SMALL_FS_MIB tmpfs (its working and output directories), then
    then(out, lines, root) on the shim run's output, lines and tmpfs."""
    if in_namespace_or_rerun(name, shim, bindir, py):
        return
    roots = [os.path.join(work, d) for d in ("plain", "shim")]
    try:
        for root in roots:
            mount_small_fs(root)
        out, lines, status = twin_runs(work, [os.path.join(bindir, "host_disk_full"), *host_args], shim,
                                       default_out=True, max_lines=1)
        check(status == 0, f"the host's own write failed: {status}")
        check(len(lines) == 1 and "last 16 MiB" in lines[0], f"want one line about the reserve: {lines}")
        then(out, lines, roots[1])
    finally:
        for root in roots:
            subprocess.run(["umount", "-l", root], capture_output=True)


def case_disk_full(work, shim, bindir, py):
    # the host's 8 MiB file fits only if the shim stopped before the reserve
    # (16 MiB of the 40) and gave back its WAL
    def then(out, lines, root):
        (db,) = dbs(out)
        check("is kept, marked incomplete" in lines[0], f"the line says what is left: {lines}")
        check(not os.path.exists(db + "-wal") or os.path.getsize(db + "-wal") == 0, "the WAL was given back")
        check(q(db, "pragma integrity_check") == [("ok",)], "integrity")
        check(run_row(db)[0] == 0, "a run stopped by a full disk is not complete")
        check(q(db, "select count(*) from event")[0][0] > 1000, "what fitted is kept")
        free = os.statvfs(root)
        check(free.f_bavail * free.f_frsize >= 8 << 20, "the reserve is free after the run")
    on_small_fs("disk_full", work, shim, bindir, py, ["0", "8"], then)


def case_disk_full_early(work, shim, bindir, py):
    # the host leaves less than the reserve (10 MiB of 40) before its first
    # record: the shim makes no database, and the host's next 4 MiB fit
    def then(out, lines, root):
        check("is not made" in lines[0], f"the line says no database was made: {lines}")
        no_half_made_files(out)
    on_small_fs("disk_full_early", work, shim, bindir, py, ["30", "4"], then)


HERE = os.path.dirname(os.path.abspath(__file__))
CASES = {name[5:]: fn for name, fn in globals().items() if name.startswith("case_")}


def main(cases=None, doc=__doc__):
    cases = cases or CASES
    if len(sys.argv) < 4 or sys.argv[1] not in cases:
        print(doc + "cases: " + " ".join(cases), file=sys.stderr)
        return 2
    name, shim, bindir = sys.argv[1:4]
    py = sys.argv[4] if len(sys.argv) > 4 and sys.argv[4] else sys.executable
    with tempfile.TemporaryDirectory(prefix="tpaudit-hostile-") as work:
        try:
            cases[name](work, os.path.abspath(shim), os.path.abspath(bindir), py)
        except Skip as e:
            print(f"SKIP: {name}: {e}")
            return 77
        except (Fail, sqlite3.Error, ValueError) as e:
            print(f"FAIL: {name}: {type(e).__name__ if not isinstance(e, Fail) else ''} {e}", file=sys.stderr)
            return 1
    print(f"PASS: {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
