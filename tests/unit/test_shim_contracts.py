"""Contracts of the shim's C API checked from outside: the TPAUDIT_AUDIT
grammar (audit_cases.txt) gives the same plan to a C caller and to the
Python probe, a malformed value warns once and is left as the user set it,
and a caller built with an older (smaller) struct_size still records.

Run as: python -m pytest test_shim_contracts.py (env: TPAUDIT_SHIM, the
built libtpaudit.so; TPAUDIT_UNIT_BIN, the folder with the host programs;
TPAUDIT_PYTHON_DIR, the probe's package folder)."""
import glob
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
SHIM = os.environ["TPAUDIT_SHIM"]
BIN = Path(os.environ["TPAUDIT_UNIT_BIN"])
PYDIR = os.environ["TPAUDIT_PYTHON_DIR"]


def cases():
    for line in (HERE / "audit_cases.txt").read_text().splitlines():
        if line.startswith("#") or not line.strip():
            continue
        value, wants, warn = line.split("|")
        value = value[:-1]  # the value ends one space before the first "|"
        yield pytest.param(value, wants.strip(), warn.strip() == "warn", id=repr(value))


def base_env(tmp_path, **extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("TPAUDIT_")}
    env.update(TPAUDIT_OUT=str(tmp_path / "out"), TPAUDIT_PYTHON="off", TPAUDIT_CUPTI="off", **extra)
    return env


PROBE = """
import sys
from tpaudit import _config, _native
assert _native.load_recorder() is not None, "the probe could not load the shim"
plan = _config.audit_plan()
wanted = [s for s in range(1, 13) if plan.wants(s)]
due, walked = plan.first, []
while 0 < due <= 12:
    walked.append(due)
    due = plan.next_after(due)
assert walked == wanted, (walked, wanted)  # the hot path's walk agrees with wants()
print(" ".join([str(s) for s in wanted] + (["exit"] if plan.at_exit else [])))
"""


@pytest.mark.parametrize("value,wants,warn", cases())
def test_audit_grammar_c_and_python(tmp_path, value, wants, warn):
    env = base_env(tmp_path, TPAUDIT_AUDIT=value)
    c = subprocess.run([str(BIN / "audit_wants_host")], env=dict(env, LD_PRELOAD=SHIM),
                       capture_output=True, text=True, timeout=60)
    assert c.returncode == 0, c.stderr
    seen_wants, seen_env = c.stdout.split("\n")[:2]
    assert seen_wants == wants
    assert seen_env == value, "the shim rewrote TPAUDIT_AUDIT"
    warnings = [l for l in c.stderr.splitlines() if l.startswith("tpaudit:")]
    assert len(warnings) == (1 if warn else 0), c.stderr
    if warn:
        assert "TPAUDIT_AUDIT" in warnings[0]

    py = subprocess.run([sys.executable, "-c", PROBE], env=dict(env, TPAUDIT_LIBRARY=SHIM, PYTHONPATH=PYDIR),
                        capture_output=True, text=True, timeout=60)
    assert py.returncode == 0, py.stderr
    assert py.stdout.strip() == wants


def test_without_the_shim_nothing_is_audited(tmp_path):
    env = base_env(tmp_path, TPAUDIT_AUDIT="all,exit")
    c = subprocess.run([str(BIN / "audit_wants_host")], env=env, capture_output=True, text=True, timeout=60)
    assert c.returncode == 3 and c.stdout.split("\n")[0] == ""
    code = "from tpaudit import _config; p = _config.audit_plan(); print(p.wants(1), p.at_exit)"
    py = subprocess.run([sys.executable, "-c", code], env=dict(env, PYTHONPATH=PYDIR,
                        TPAUDIT_LIBRARY=str(tmp_path / "absent.so")), capture_output=True, text=True, timeout=60)
    assert py.returncode == 0, py.stderr
    assert py.stdout.split() == ["False", "False"]


def test_older_struct_size_caller(tmp_path):
    env = base_env(tmp_path, LD_PRELOAD=SHIM)
    r = subprocess.run([str(BIN / "struct_size_host")], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert not [l for l in r.stderr.splitlines() if l.startswith("tpaudit:")], r.stderr
    dbs = glob.glob(str(tmp_path / "out" / "**" / "*.db"), recursive=True)
    assert len(dbs) == 1, dbs
    with sqlite3.connect(dbs[0]) as db:
        assert db.execute("SELECT label, step FROM audit").fetchall() == [("older", 1)]
        assert db.execute("SELECT key, name, shape, dtype, nbytes, requires_grad, type FROM tensor").fetchall() == \
            [(7, "older.weight", "[4,8]", "float32", 128, 1, None)]
        assert db.execute("SELECT holder_class, path, tensor_key, peer_key FROM ref").fetchall() == \
            [("Older", "weight", 7, 0)]
        assert db.execute("SELECT name, old_key, new_key, detail, py_stack FROM event"
                          " WHERE kind = 'param_replaced'").fetchall() == [("older.weight", 7, 8, "older caller", None)]
