#!/usr/bin/env python3
"""hostile_probe.py - hostile-host cases of the Python probe: programs that
run the probe's code inside their own calls.  Same rules as hostile_run.py
(whose helpers it uses): each host runs with and without the shim, and its
exit status, output and files must match.

- stderr_none: an error inside the probe while sys.stderr is None (set by
  the program, or fd 2 closed at start) does not reach the program (it
  turns the probe's replacement events off, with no line to write);
- compile: torch.compile under -W error::UserWarning prints the same
  counters, graphs, guards and losses, and the probe still finds the model
  that ran forward only inside a compiled function;
- apis: the torch functions the probe patches keep their name, qualname,
  module, doc and signature, and pickle;
- collections: a program with reference cycles that hold tensors; no
  garbage collection starts while the probe's code runs (the probe holds
  the collector off: python/tpaudit/_collector.py), so none of the
  program's __del__ runs inside an audit;
- frames: a function that trained two steps (its frame on the stack
  during the step audits) returns, with the collector off: the tensors its
  frame held are freed as it returns, with the probe as without it (the
  holder walk keeps no reference cycle through the frames it read);
- coverage: `coverage run` and `pytest --cov --cov-fail-under` of a program
  report what they report without the probe (skips, saying why, when the
  venv has no coverage.py).

usage: hostile_probe.py CASE SHIM BINDIR [PYTHON]
"""
import json
import os
import subprocess
import sys

import hostile_run as H
from hostile_run import check, dbs, q, twin_runs

HERE = os.path.dirname(os.path.abspath(__file__))


def host(name):
    return os.path.join(HERE, name)


def case_stderr_none(work, shim, bindir, py):
    # the error is in the replacement events, a part that turns off alone
    # (its line has no stream to go to); the audit goes on, and the shim's
    # own verdict line for the parent's stale block goes to fd 2, still open
    out, lines, _ = twin_runs(work, [py, host("host_probe_stderr.py")], shim, limit_s=120, max_lines=1)
    check(all(line.startswith("tpaudit: at step 1: stale_param") for line in lines), f"unexpected lines: {lines}")
    found = dbs(out)
    check(len(found) == 2, f"want the program's and its child's databases, got {found}")
    for db in found:
        check(q(db, "select python from run") == [("on; unjudged: stale; parts off: replacement_events",)],
              f"{db}: the probe's error did not happen: {q(db, 'select python from run')}")


def case_compile(work, shim, bindir, py):
    keys = os.path.join(work, "second-model-keys.json")
    os.environ["HOST_COMPILE_KEYS"] = keys
    out, _, _ = twin_runs(work, [py, "-W", "error::UserWarning", host("host_compile.py")], shim, limit_s=300)
    with open(keys) as f:
        second = set(json.load(f))
    (db,) = dbs(out)
    audits = q(db, "select id from audit where end_ns is not null")
    check(audits, "no audit was taken")
    found = [a for (a,) in audits
             if second <= {k for (k,) in q(db, f"select tensor_key from ref where audit_id = {a} "
                                               "and holder_kind = 'module' and role = 'param'")}]
    check(found, "no audit holds the parameters of the model that ran forward only when compiled")


def case_apis(work, shim, bindir, py):
    twin_runs(work, [py, host("host_probe_apis.py")], shim, limit_s=120)


def case_collections(work, shim, bindir, py):
    out, _, _ = twin_runs(work, [py, host("host_collections.py")], shim, limit_s=300)
    (db,) = dbs(out)
    check(q(db, "select count(*) from audit where end_ns is not null")[0][0] >= 2, "fewer than 2 audits were taken")


def case_frames(work, shim, bindir, py):
    out, _, _ = twin_runs(work, [py, host("host_frames.py")], shim, limit_s=300)  # stdout: freed, as without
    (db,) = dbs(out)
    check(q(db, "select count(*) from audit where end_ns is not null")[0][0] >= 2, "fewer than 2 audits were taken")


def case_coverage(work, shim, bindir, py):
    r = subprocess.run([py, "-c", "import coverage, pytest_cov"], capture_output=True, text=True)
    if r.returncode != 0:
        raise H.Skip("this venv has no coverage.py and pytest-cov (requirements.lock pins them): "
                     + r.stderr.strip().splitlines()[-1])
    twin_runs(work, [py, host("host_coverage.py")], shim, limit_s=300)


CASES = {name[5:]: fn for name, fn in globals().items() if name.startswith("case_")}

if __name__ == "__main__":
    sys.exit(H.main(CASES, __doc__))
