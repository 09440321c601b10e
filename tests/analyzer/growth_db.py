"""Databases of schema version 2 for the memory_growth rule, built with
sqlite3 from the seed bug's fixed script (fixtures/seed.sql.in, a version-1
file): its audit copied to the steps a scenario audits, a ledger at each
(table ledger, as the probe writes it) and a sample per step.  A scenario is
the bytes one holder keeps at each audit; the rest of the ledger is fixed."""
import sqlite3
from pathlib import Path

HERE = Path(__file__).resolve().parent
SEED = (HERE / "fixtures" / "seed.sql.in").read_text()
MIB = 1 << 20

LEDGER_DDL = """
CREATE TABLE ledger(audit_id INTEGER NOT NULL, device TEXT NOT NULL, owner_kind TEXT NOT NULL, owner TEXT,
  holder_class TEXT, path TEXT, bytes INTEGER NOT NULL, tensors INTEGER NOT NULL, shapes TEXT, dtype TEXT,
  with_graph INTEGER NOT NULL DEFAULT 0, created_at TEXT);
CREATE INDEX ledger_by_audit ON ledger(audit_id);
CREATE TABLE sample(step INTEGER NOT NULL, ts_ns INTEGER NOT NULL, device TEXT NOT NULL, live_bytes INTEGER NOT NULL,
  reserved_bytes INTEGER, py_blocks INTEGER);
PRAGMA user_version=2;
"""

PARAMS = 474 * MIB


def build(path, audits, holder="__main__.kept", stale=False, rank=0, kind="held",
          created="train.py:18:main\ntrain.py:40:<module>"):
    """audits: [(step, held_bytes)], step -1 for the exit audit (it counts at
    the last step sampled, 60); steps above 3 are labelled 'growth'.  stale: keep the seed's stale tensor."""
    c = sqlite3.connect(path)
    c.executescript(SEED.replace("RANK_ID", str(rank)))
    c.executescript(LEDGER_DDL)
    if not stale:  # the optimizer holds the live param: no stale finding
        c.execute("UPDATE ref SET tensor_key=200 WHERE tensor_key=100 AND role='group_param'")
    c.execute("DELETE FROM audit")
    c.execute("DELETE FROM alloc")  # CUPTI off: the probe's measured_total is the total
    for i, (step, held) in enumerate(audits, start=1):
        begin = 10_000 * (step if step >= 0 else 61)
        c.execute("INSERT INTO audit VALUES(?,?,?,?,?,?,2)",
                  (i, "exit" if step < 0 else ("step" if step <= 3 else "growth"), step, begin, begin + 100, rank))
        if i > 1:
            c.execute("INSERT INTO tensor SELECT ?,key,name,shape,local_shape,dtype,device,storage_ptr,storage_bytes,"
                      "nbytes,requires_grad,has_grad,type FROM tensor WHERE audit_id=1", (i,))
            c.execute("INSERT INTO ref SELECT ?,holder_kind,holder_class,holder_id,path,role,tensor_key,peer_key "
                      "FROM ref WHERE audit_id=1", (i,))
        rows = [("parameter", "transformer", PARAMS, 148, None, "float32", 0, None),
                ("optimizer_state", "AdamW", 2 * PARAMS, 296, None, "float32", 0, None)]
        if held:
            rows.append((kind, holder, held, max(1, held // (196 * MIB)), '[[4,256,50257]]', "float32", 1, created))
        for kind_, owner, b, n, shapes, dtype, graph, at in rows:
            c.execute("INSERT INTO ledger VALUES(?,?,?,?,?,?,?,?,?,?,?,?)",
                      (i, "cuda:0", kind_, owner, None, owner, b, n, shapes, dtype, graph, at))
        total = PARAMS * 3 + held + 8 * MIB
        c.execute("INSERT INTO ledger VALUES(?,?,?,?,?,?,?,?,?,?,?,?)",
                  (i, "cuda:0", "measured", None, None, None, total, 0, None, None, 0, None))
    for step in range(1, 61):
        c.execute("INSERT INTO sample VALUES(?,?,?,?,?,?)", (step, 10_000 * step + 50, "cuda:0", 0, None, None))
    c.commit()
    c.close()
    return path


def leak(step):
    """A list that keeps one 196 MiB tensor with its graph every step from step 3."""
    return max(0, step - 2) * 196 * MIB
