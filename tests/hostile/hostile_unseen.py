#!/usr/bin/env python3
"""hostile_unseen.py - hosts that must not see the shim in their signals,
descriptors, file-size or thread limits, and runs whose records died with
the process, which must never read as clean.  Each case runs its host
without and with the shim (hostile_run.twin_runs: same exit status, stdout,
stderr less `tpaudit:` lines, files), then checks the databases, `report`,
`gate` and the verdict of `tpaudit run`.

usage: hostile_unseen.py CASE SHIM BINDIR [PYTHON]
"""
import json
import os
import resource
import shutil
import subprocess
import sys
import sysconfig

import hostile_run as hr
from hostile_run import Fail, Skip, check, dbs, q, twin_runs

NO_CORE = [(resource.RLIMIT_CORE, 0)]
TRIES = 20


def tpaudit(shim):
    return os.path.join(os.path.dirname(os.path.dirname(shim)), "bin", "tpaudit")


def inconclusive(shim, out):
    """report and gate on `out` say inconclusive, never clean: the gate exits 3, or 1 when
    an audit the killed process did commit holds an error (a failure found stands), with
    the run still named inconclusive."""
    rep = subprocess.run([tpaudit(shim), "report", out], capture_output=True, text=True)
    text = rep.stdout + rep.stderr
    check("inconclusive" in text.lower(), f"report does not say inconclusive:\n{text[-1500:]}")
    check("verdict: clean" not in text, f"report says clean:\n{text[-1500:]}")
    gate = subprocess.run([tpaudit(shim), "gate", out], capture_output=True, text=True)
    doc = subprocess.run([tpaudit(shim), "report", "--format", "json", out], capture_output=True, text=True)
    errors = any(f["severity"] == "error" for f in json.loads(doc.stdout)["findings"])
    want = 1 if errors else 3
    check(gate.returncode == want and ": inconclusive: " in gate.stderr,
          f"gate exits {gate.returncode}, want {want} (an error {'stands' if errors else 'none'}, the run "
          f"inconclusive):\n{gate.stdout}{gate.stderr}")


def host(bindir, *args):
    return [os.path.join(bindir, args[0]), *args[1:]]


# ---- records that died with the process ----

def killed_case(work, shim, bindir, mode):
    """Each try: the host records a stale audit and 10,000 events, then dies
    of `mode` (pipe: writing into `| head -c 1`)."""
    argv = host(bindir, "host_signals", mode)
    if mode == "pipe":
        argv = ["bash", "-c", '"$0" pipe | head -c 1; exit "${PIPESTATUS[0]}"', argv[0]]
    for i in range(TRIES):
        sub = os.path.join(work, str(i))
        os.makedirs(sub)
        out, _, status = twin_runs(sub, argv, shim, NO_CORE, max_lines=2)
        check(status in (141, -6, -9, 128 + 6, 128 + 9), f"try {i}: the host must die of its signal, got {status}")
        check(len(dbs(out)) == 1, f"try {i}: one database, got {dbs(out)}")
        inconclusive(shim, out)


def case_killed_pipe(work, shim, bindir, py):
    killed_case(work, shim, bindir, "pipe")


def case_killed_abort(work, shim, bindir, py):
    killed_case(work, shim, bindir, "abort")


def case_killed_sigkill(work, shim, bindir, py):
    # no handler can run: the judgement alone keeps it from reading clean
    killed_case(work, shim, bindir, "kill9")


def case_killed_run(work, shim, bindir, py):
    """The same under `tpaudit run`: its verdict says inconclusive."""
    for mode in ("pipe", "abort"):
        out = os.path.join(work, mode)
        cmd = [tpaudit(shim), "run", "-o", out, "--", "bash", "-c",
               'ulimit -c 0; "$0" "$1" | head -c 1; exit "${PIPESTATUS[0]}"', host(bindir, "host_signals")[0], mode]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        verdict = [ln for ln in r.stderr.splitlines() if ln.startswith("tpaudit: verdict")]
        check(verdict and "INCONCLUSIVE" in verdict[0] and not verdict[0].startswith("tpaudit: verdict: clean"),
              f"{mode}: the run's verdict: {r.stderr[-1500:]}")
        inconclusive(shim, out)


# ---- a Python child without the probe ----

PARENT = """
import subprocess, sys, torch
net = torch.nn.Linear(4, 4)
opt = torch.optim.SGD(net.parameters(), lr=0.1)
try:
    import tpaudit  # the probe, with the shim
    tpaudit.audit()
except ImportError:
    pass
child = ("import sys; sys.path.append(%r); import torch; net = torch.nn.Linear(4, 4);"
         "opt = torch.optim.SGD(net.parameters(), lr=0.1); net.weight = torch.nn.Parameter(torch.ones(4, 4))")
sys.exit(subprocess.run([sys.executable, sys.argv[1], "-c", child % sys.argv[2]]).returncode)
"""


def child_case(work, shim, py, flag, python_field):
    try:
        import torch  # noqa: F401  (the venv's; the child finds it by path)
    except ImportError:
        raise Skip("torch is not installed")
    site = os.path.dirname(os.path.dirname(torch.__file__))
    out, _, status = twin_runs(work, [py, "-c", PARENT, flag, site], shim, max_lines=4, limit_s=120)
    check(status == 0, f"exit status {status}")
    fields = sorted(r[0] for db in dbs(out) for r in q(db, "select python from run"))
    check(any(f.startswith(python_field) for f in fields), f"the child's database must say {python_field!r}: {fields}")
    inconclusive(shim, out)


def case_python_isolated(work, shim, bindir, py):
    child_case(work, shim, py, "-I", "off: -I/-E")


def case_python_nosite(work, shim, bindir, py):
    child_case(work, shim, py, "-S", "off: probe never started")


# ---- harm to the host ----

def case_fsize(work, shim, bindir, py):
    # SIGXFSZ at its default action (subprocess restores it in the child)
    for kib in (16, 32, 64):
        sub = os.path.join(work, str(kib))
        os.makedirs(sub)
        twin_runs(sub, host(bindir, "host_limits", "files"), shim, [(resource.RLIMIT_FSIZE, kib << 10)] + NO_CORE,
                  max_lines=1)


def case_unwind_pipe(work, shim, bindir, py):
    out, _, status = twin_runs(work, host(bindir, "host_unwind"), shim)
    check(status == 0, f"exit status {status}")
    check(q(dbs(out)[0], "select count(*) from stack")[0][0] > 0, "the stacks through the frame were captured")


def case_signals_query(work, shim, bindir, py):
    twin_runs(work, host(bindir, "host_signals", "query"), shim)


def case_signals_curses(work, shim, bindir, py):
    twin_runs(work, host(bindir, "host_signals", "curses"), shim)


def case_signals_term(work, shim, bindir, py):
    # the host sets SIGTERM to SIG_DFL itself and dies of it: still committed
    out, _, status = twin_runs(work, host(bindir, "host_signals", "term"), shim)
    check(status == -15, f"want death by SIGTERM, got {status}")
    (db,) = dbs(out)
    check(q(db, "select count(*) from event")[0][0] == 1, "the event before SIGTERM is committed")


def case_signals_embed(work, shim, bindir, py):
    libdir, name = sysconfig.get_config_var("LIBDIR"), sysconfig.get_config_var("LDLIBRARY")
    lib = os.path.join(libdir or "", name or "")
    if not name or not name.endswith(".so") or not os.path.exists(lib):
        raise Skip(f"no shared libpython here ({lib})")
    _, _, status = twin_runs(work, host(bindir, "host_signals", "embed", lib), shim)
    check(status == 0, f"exit status {status}")


def case_nofile64(work, shim, bindir, py):
    out, lines, _ = twin_runs(work, host(bindir, "host_limits", "files", "100"), shim,
                              [(resource.RLIMIT_NOFILE, 64)], max_lines=1)
    check(lines and "gives its own back" in lines[0], f"the shim says it gave its descriptors back: {lines}")
    (db,) = dbs(out)
    check(q(db, "pragma integrity_check") == [("ok",)], "integrity")
    check(q(db, "select complete from run")[0][0] == 0, "a database given back is marked incomplete")


def case_nofile64_numbers(work, shim, bindir, py):
    # issue 40, item 5: the host opens until EMFILE under RLIMIT_NOFILE 64 and gets 3..63 in order with the shim as
    # without it (twin_runs compares the printed numbers), then a pipe and a reopen at the same numbers
    out, lines, _ = twin_runs(work, host(bindir, "host_limits", "numbers"), shim, [(resource.RLIMIT_NOFILE, 64)],
                              max_lines=1)
    check(lines and "gives its own back" in lines[0], f"the shim says it gave its descriptors back: {lines}")
    (db,) = dbs(out)
    check(q(db, "pragma integrity_check") == [("ok",)], "integrity")


def case_nproc(work, shim, bindir, py):
    setpriv = shutil.which("setpriv")
    if os.geteuid() != 0 or not setpriv:
        raise Skip("RLIMIT_NPROC binds only an unprivileged user: needs root and setpriv(1) to become one")
    nobody = 65534
    tasks = subprocess.run(["ps", "-U", str(nobody), "-L", "--no-headers"], capture_output=True, text=True)
    used = len(tasks.stdout.splitlines()) + 1  # and the host's main thread
    os.chmod(work, 0o755)
    os.makedirs(os.path.join(work, "out"), mode=0o777)
    os.chmod(os.path.join(work, "out"), 0o777)
    argv = [setpriv, f"--reuid={nobody}", f"--regid={nobody}", "--clear-groups",
            *host(bindir, "host_limits", "threads", "4")]
    out, lines, _ = twin_runs(work, argv, shim, [(resource.RLIMIT_NPROC, used + 4)], max_lines=1)
    check(not dbs(out), f"no writer, no database: {dbs(out)}")


CASES = {name[5:]: fn for name, fn in globals().items() if name.startswith("case_")}

if __name__ == "__main__":
    sys.exit(hr.main(CASES, __doc__))
