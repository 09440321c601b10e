#!/usr/bin/env python3
"""hostile_read.py - the analyzer reading databases where hosts leave them:
- starting: reports and gates taken while a process is creating its
  database (20 tries, each as soon as the file appears), and the three
  states a reader can meet (an empty file, no tables yet, no run row yet):
  each is a run that is "starting" (report exit 0, gate 3: it cannot be
  judged yet), never an error; a file the shim would not have named keeps
  its error (exit 2);
- wal_tmpdir: a killed run's database with a WAL, read with $TMPDIR
  missing, and (in a user and mount namespace) with $TMPDIR on a full
  1 MiB tmpfs: the same report as with a usable $TMPDIR; with every place
  for a private copy full or read-only, exit 2 naming each cause.
Same helpers as hostile_run.py.

usage: hostile_read.py CASE SHIM BINDIR [PYTHON]
"""
import os
import shutil
import sqlite3
import subprocess
import sys
import time

import hostile_run as H
from hostile_run import Fail, Skip, check

TRIES = 20


def cli(bindir, args, env=None):
    r = subprocess.run([os.path.join(bindir, "tpaudit")] + args, capture_output=True, text=True, env=env)
    return r.returncode, r.stdout, r.stderr


def check_starting(bindir, path, what):
    rc, out, err = cli(bindir, ["report", path])
    check(rc == 0 and "starting" in out + err, f"{what}: report exit {rc}: {out[-300:]} {err[-300:]}")
    rc, out, err = cli(bindir, ["gate", path])
    check(rc == 3, f"{what}: gate exit {rc} (want 3, inconclusive): {err[-300:]}")


def case_starting(work, shim, bindir, py):
    # the three states, made by hand
    states = os.path.join(work, "states")
    os.makedirs(states)
    empty = os.path.join(states, "tpaudit-host-1.db")
    open(empty, "w").close()
    check_starting(bindir, empty, "an empty file")
    no_tables = os.path.join(states, "tpaudit-host-2.db")
    con = sqlite3.connect(no_tables)
    con.execute("pragma journal_mode=wal")
    con.close()
    check_starting(bindir, no_tables, "a database with no tables")
    no_run = os.path.join(states, "tpaudit-host-3.db")
    con = sqlite3.connect(no_run)
    for t in ("run", "audit", "tensor", "ref", "event", "alloc"):
        con.execute(f"create table {t}(x)")
    con.execute("pragma user_version=1")
    con.commit()
    con.close()
    check_starting(bindir, no_run, "a database with no run row")
    other = os.path.join(states, "other.db")
    open(other, "w").close()
    rc, _, err = cli(bindir, ["report", other])
    check(rc == 2 and "not a SQLite database" in err, f"a file the shim did not name: exit {rc}: {err}")
    # the race, with the shim making the database
    host = [os.path.join(bindir, "host_exec"), "0", "exit"]
    for i in range(TRIES):
        out = os.path.join(work, f"race-{i}")
        env = dict(os.environ, LD_PRELOAD=shim, TPAUDIT_OUT=out)
        p = subprocess.Popen(host, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        found = []
        while not found and time.monotonic() < deadline:
            found = [f for f in os.listdir(out)] if os.path.isdir(out) else []
        results = [cli(bindir, [cmd, out]) for cmd in ("report", "gate")]
        p.wait()
        check(found, f"try {i}: no database appeared")
        for cmd, (rc, _, err) in zip(("report", "gate"), results):
            check(rc != 2, f"try {i}: {cmd} exit 2 while the database was made: {err[-400:]}")


def killed_run(work, py, shim):
    """A database whose process was killed with its WAL uncheckpointed."""
    out = os.path.join(work, "killed")
    code = ("import os, signal, torch, tpaudit\n"
            "m = torch.nn.Linear(2, 2)\n"
            "opt = torch.optim.SGD(m.parameters(), lr=0.1)\n"
            "tpaudit.audit()\n"
            "os.kill(os.getpid(), signal.SIGKILL)\n")
    subprocess.run([py, "-c", code], env=dict(os.environ, LD_PRELOAD=shim, TPAUDIT_OUT=out),
                   capture_output=True)
    (db,) = H.dbs(out)
    check(os.path.getsize(db + "-wal") > 0, "the killed run left no WAL")
    return db


def case_wal_tmpdir(work, shim, bindir, py):
    inner = os.environ.get("TPAUDIT_HOSTILE_NS") == "1"
    db = os.environ["HOSTILE_READ_DB"] if inner else killed_run(work, py, shim)
    want = [cli(bindir, [cmd, db]) for cmd in ("report", "gate")]
    check(want[0][0] == 0, f"report with a usable TMPDIR: exit {want[0][0]}: {want[0][2]}")

    def same_as_usable(tmpdir, what):
        env = dict(os.environ, TMPDIR=tmpdir)
        for cmd, (rc, out, _) in zip(("report", "gate"), want):
            got = cli(bindir, [cmd, db], env)
            check(got[:2] == (rc, out), f"{cmd} with {what}: exit {got[0]} (want {rc}): {got[2][-400:]}")
    if not inner:
        same_as_usable(os.path.join(work, "no-such-dir"), "TMPDIR missing")
        os.environ["HOSTILE_READ_DB"] = db
        if H.in_namespace_or_rerun("wal_tmpdir", shim, bindir, py, __file__):
            return
        raise Fail("unreachable")
    # inside the namespace: TMPDIR on a full 1 MiB tmpfs
    full = os.path.join(work, "full")
    os.makedirs(full)
    mount(["-t", "tmpfs", "-o", "size=1m", "tmpfs", full])
    try:
        with open(os.path.join(full, "filler"), "wb") as f:
            while True:
                f.write(b"\0" * 65536)
                f.flush()
    except OSError:
        pass
    same_as_usable(full, "TMPDIR on a full 1 MiB tmpfs")
    # every place full or read-only: the database's directory made read-only
    # (read from inside it: it is under /tmp), and /tmp, /var/tmp and /dev/shm
    # covered by the full tmpfs
    src = os.path.dirname(db)
    # the tool is run from a descriptor opened now: a build under /tmp is
    # covered by the mounts below
    tool = os.open(os.path.join(bindir, "tpaudit"), os.O_RDONLY)
    mount(["--bind", src, src])
    mount(["-o", "remount,ro,bind", src])
    os.chdir(src)
    for d in ("/var/tmp", "/dev/shm", "/tmp"):
        if os.path.isdir(d):
            mount(["--bind", full, d])
    r = subprocess.run([f"/proc/self/fd/{tool}", "report", os.path.basename(db)], pass_fds=(tool,),
                       capture_output=True, text=True, env=dict(os.environ, TMPDIR="/tmp"))
    rc, err = r.returncode, r.stderr
    check(rc == 2, f"with nowhere to copy: exit {rc}")
    check("No space left on device" in err and "Read-only file system" in err and "No such file" not in err,
          f"the error must name each real cause: {err}")


def mount(args):
    r = subprocess.run(["mount"] + args, capture_output=True, text=True)
    if r.returncode != 0:
        raise Skip(f"mount {' '.join(args)}: {r.stderr.strip()}")


CASES = {name[5:]: fn for name, fn in globals().items() if name.startswith("case_")}

if __name__ == "__main__":
    sys.exit(H.main(CASES, __doc__))
