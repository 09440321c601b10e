#!/usr/bin/env python3
"""hostile_life.py - hostile-host cases about how a process stops being the
process it was (shim/process_life.c): the main thread leaving by
pthread_exit, exit() from a worker thread while others record (20 runs),
a child of the raw clone system call, an exec that fails after the
database was ended for it, and exit under 64 recording threads with the
machine loaded.  Same rules as hostile_run.py (whose helpers it
uses): each host runs with and without the shim, and its exit status,
output and files must match.

usage: hostile_life.py CASE SHIM BINDIR [PYTHON]
"""
import os
import subprocess
import sys

import hostile_run as H
from hostile_run import check, dbs, q, run_row, twin_runs

EXIT_WORKER_RUNS = 20
BUSY_LOOPS = 4
LOADED_RUNS = 5


def readable(db):
    """A database a report can read: whole, with its tables and its run row."""
    check(os.path.getsize(db) > 0, f"0-byte database {db}")
    check(q(db, "pragma integrity_check") == [("ok",)], f"integrity of {db}")
    tables = {r[0] for r in q(db, "select name from sqlite_master where type = 'table'")}
    check({"run", "audit", "event"} <= tables, f"{db} lacks tables: {sorted(tables)}")


def cli_reads(out, bindir):
    """tpaudit report and gate read the directory (exit 2 when a database is not whole)."""
    for cmd in (["report", out], ["gate", out]):
        r = subprocess.run([os.path.join(bindir, "tpaudit")] + cmd, capture_output=True, text=True)
        check(r.returncode == 0, f"tpaudit {cmd[0]}: exit {r.returncode}: {r.stderr[-500:]}")


def case_pthread_exit(work, shim, bindir, py):
    for mode, events in (("threads", 4000), ("alone", 0)):
        sub = os.path.join(work, mode)
        out, _, status = twin_runs(sub, [os.path.join(bindir, "host_pthread_exit"), mode], shim)
        check(status == 0, f"{mode}: exit status {status}")
        (db,) = dbs(out)
        readable(db)
        check(run_row(db)[:4] == (1, 0, "exit", 1), f"{mode}: run row {run_row(db)}")
        check(q(db, "select count(*), count(end_ns) from audit")[0] == (1, 1), f"{mode}: the audit")
        check(q(db, "select count(*) from event")[0][0] == events, f"{mode}: want {events} events")


def case_exit_worker(work, shim, bindir, py):
    made = 0
    for i in range(EXIT_WORKER_RUNS):
        sub = os.path.join(work, str(i))
        delay_us = (i * 97) % 1000
        out, _, status = twin_runs(sub, [os.path.join(bindir, "host_exit_worker"), str(delay_us)], shim)
        check(status == 3, f"run {i}: exit status {status}")
        found = dbs(out)
        check(len(found) <= 1, f"run {i}: want one database at most, got {found}")
        for db in found:
            readable(db)
            complete, exit_status, ended, has_end, dropped = run_row(db)
            check((exit_status, ended, has_end) == (3, "exit", 1), f"run {i}: run row {run_row(db)}")
            check(complete == 1 or dropped > 0, f"run {i}: an incomplete end counts what it dropped")
            cli_reads(out, bindir)
            made += 1
    check(made >= EXIT_WORKER_RUNS // 2, f"only {made} of {EXIT_WORKER_RUNS} runs recorded before the exit")


def case_clone(work, shim, bindir, py):
    out, _, status = twin_runs(work, [os.path.join(bindir, "host_clone")], shim)
    check(status == 0, f"exit status {status}")
    found = dbs(out)
    check(len(found) == 2, f"want the parent's and the clone child's databases, got {found}")
    by_step = {}
    for db in found:
        readable(db)
        (step,) = q(db, "select step from audit")[0]
        by_step[step] = db
    check(sorted(by_step) == [1, 2], f"one audit in each: {sorted(by_step)}")
    parent, child = by_step[1], by_step[2]
    check(q(child, "select count(*) from event")[0][0] == 1000, "the child's 1000 events")
    check(run_row(child)[:4] == (1, 4, "exit", 1), f"child run row {run_row(child)}")
    check(q(parent, "select count(*) from event")[0][0] == 1, "the parent's event after the wait")
    check(run_row(parent)[:4] == (1, 0, "exit", 1), f"parent run row {run_row(parent)}")
    pids = {q(db, "select pid from run")[0][0] for db in found}
    check(len(pids) == 2, f"two processes: {pids}")


def case_exec_fail(work, shim, bindir, py):
    # the exec's end is undone: the same file again, or (nothing recorded) a new one
    bad = os.path.join(work, "not-a-program")
    with open(bad, "w") as f:
        f.write("not a program\n")
    os.chmod(bad, 0o755)
    for mode, audits in (("recorded", [1, 2]), ("empty", [2])):
        sub = os.path.join(work, mode)
        out, _, status = twin_runs(sub, [os.path.join(bindir, "host_exec_fail"), mode, bad], shim)
        check(status == 0, f"{mode}: exit status {status}")
        (db,) = dbs(out)
        readable(db)
        check([r[0] for r in q(db, "select step from audit order by id")] == audits, f"{mode}: audits")
        check(run_row(db)[:4] == (1, 0, "exit", 1), f"{mode}: run row {run_row(db)}")


def case_exit_threads_loaded(work, shim, bindir, py):
    # each loop in a session of its own: with autogroup scheduling, loops of one
    # session would share one slice beside the host's
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True)
            for _ in range(BUSY_LOOPS)]
    try:
        for i in range(LOADED_RUNS):
            H.check_exit_threads(os.path.join(work, str(i)), shim, bindir)
    finally:
        for p in busy:
            p.kill()
            p.wait()


CASES = {name[5:]: fn for name, fn in globals().items() if name.startswith("case_")}

if __name__ == "__main__":
    sys.exit(H.main(CASES, __doc__))
