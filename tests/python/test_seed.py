"""End-to-end: seed embedding scenario under the shim, asserting recorded DB rows."""
import json
import os
import sqlite3
import subprocess
import sys

from audit_points import assert_every_audit, stale_from

HERE = os.path.dirname(os.path.abspath(__file__))
LIB = os.environ["TPAUDIT_TEST_LIB"]
TPAUDIT = os.path.join(os.path.dirname(os.path.dirname(LIB)), "bin", "tpaudit")

STALE = ("select t.name, t.shape, t.has_grad, t.storage_bytes from tensor t join ref r "
         "on r.audit_id=t.audit_id and r.tensor_key=t.key where r.role='group_param' "
         "and t.audit_id=1 and not exists(select 1 from ref q where q.audit_id=1 "
         "and q.role='param' and q.tensor_key=t.key)")


def run(tmp_path, order):
    env = dict(os.environ, TPAUDIT_OUT=str(tmp_path), LD_PRELOAD=LIB)
    subprocess.run([sys.executable, os.path.join(HERE, "scenarios", "seed_embedding.py"),
                    "--order", order], env=env, check=True)
    (db,) = [f for f in os.listdir(tmp_path) if f.endswith(".db")]
    return sqlite3.connect(os.path.join(tmp_path, db))


def every_audit(tmp_path, stale):
    r = subprocess.run([TPAUDIT, "report", "--format", "json", str(tmp_path)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    return assert_every_audit(doc, stale(doc) if callable(stale) else stale, steps=[1, 2])


def test_seed_buggy(tmp_path):
    con = run(tmp_path, "buggy")
    assert con.execute("select python from run").fetchone()[0] == "on"
    assert con.execute(STALE).fetchall() == [("wte.weight", "[50257,16]", 0, 50257 * 16 * 4)]
    stack = con.execute("select py_stack from event where kind='module_replaced'").fetchone()[0]
    assert "seed_embedding.py:33:main" in stack.splitlines()[0]
    every_audit(tmp_path, lambda doc: stale_from(doc, 1))


def test_seed_fixed(tmp_path):
    con = run(tmp_path, "fixed")
    # an audit happened and saw the optimizer hold the resized embedding ...
    assert con.execute("select id, label, step from audit where id=1").fetchall() == [(1, "step", 1)]
    held = con.execute("select t.name, t.shape from tensor t join ref r on r.audit_id=t.audit_id "
                       "and r.tensor_key=t.key where t.audit_id=1 and r.role='group_param'").fetchall()
    assert ("wte.weight", "[50260,16]") in held
    # ... and every tensor it holds is a live param: nothing stale
    assert con.execute(STALE).fetchall() == []
    every_audit(tmp_path, 0)
