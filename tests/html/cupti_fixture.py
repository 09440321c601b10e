"""Databases of a two-rank CUDA run with CUPTI allocation records, for the
HTML report's memory-over-time plots on a machine without a GPU: the seed
bug's fixed SQL script (tests/analyzer/fixtures/seed.sql.in) per rank, with
device allocations over three seconds, audits at steps 1..STEPS and at exit,
a torchrun launcher process with no audit, and hostile stored strings
(markup, control bytes, invalid UTF-8) in argv, host, names and frames.

    python cupti_fixture.py OUTDIR [STEPS]   (audit steps per rank, default 2)
"""
import sqlite3
import sys
from pathlib import Path

SEED = Path(__file__).resolve().parents[1] / "analyzer" / "fixtures" / "seed.sql.in"
MIB = 1 << 20
SECOND = 1_000_000_000
HOSTILE = "<img src=x onerror=alert(1)>&\x1b[31m\u202e"
INVALID_UTF8 = b"bad\xff\xfe\xc0\xafname"


def allocations(scale):
    """(ts_ns, op, address, bytes): a model loaded, activations per step, freed at exit."""
    rows, t = [], SECOND // 10
    rows.append((t, "alloc", 0x10_0000, int(150 * MIB * scale)))
    for step in range(1, 4):
        for k in range(8):
            t += SECOND // 40
            rows.append((t, "alloc", 0x4000_0000 + step * 0x100_0000 + k * 0x10_0000, int(40 * MIB * scale)))
        for k in range(8):
            t += SECOND // 80
            rows.append((t, "free", 0x4000_0000 + step * 0x100_0000 + k * 0x10_0000, 0))
        t += SECOND // 2
    return rows


def rank_db(path, rank, scale, steps):
    with sqlite3.connect(path) as c:
        c.executescript(SEED.read_text().replace("RANK_ID", str(rank)))
        c.execute("DELETE FROM alloc")
        for i, (ts, op, address, size) in enumerate(allocations(scale), 1):
            c.execute("INSERT INTO alloc VALUES(?,?,?,?,?,'device',0,1,7,0,'cupti',?,NULL,NULL)",
                      (i, ts, op, address, size, i))
        c.execute("UPDATE audit SET begin_ns=?, end_ns=? WHERE id=1", (SECOND, SECOND + 1000))
        for step in range(2, steps + 1):  # the same holdings at every step
            ts = SECOND + (step - 1) * SECOND // max(1, steps - 1)
            c.execute("INSERT INTO audit VALUES(?,'step',?,?,?,?,2)", (step, step, ts, ts + 1000, rank))
            c.execute("INSERT INTO tensor SELECT ?,key,name,shape,local_shape,dtype,device,storage_ptr,storage_bytes,nbytes,"
                      "requires_grad,has_grad,type FROM tensor WHERE audit_id=1", (step,))
            c.execute("INSERT INTO ref SELECT ?,holder_kind,holder_class,holder_id,path,role,tensor_key,peer_key FROM ref "
                      "WHERE audit_id=1", (step,))
        c.execute("INSERT INTO audit VALUES(?,'exit',-1,?,?,?,2)", (steps + 1, 3 * SECOND, 3 * SECOND + 1000, rank))
        c.execute("UPDATE run SET pid=?, end_ns=?, argv=?, host=?", (4242 + rank, 3 * SECOND + 5000,
                  '["python","-u","train.py","--name","' + HOSTILE.replace("\x1b", "\\u001b") + '"]', "node0" + HOSTILE))
        # a hostile name on the stale tensor, and invalid UTF-8 in a second one's name and stack
        c.execute("UPDATE tensor SET name=? WHERE key=100", ("wte" + HOSTILE,))
        c.execute("UPDATE event SET py_stack=py_stack||? WHERE id=1", ("\n" + HOSTILE + ".py:7:<script>x</script>",))
        c.execute("INSERT INTO tensor SELECT id,900,CAST(? AS TEXT),'[8]','[8]','float32','cuda:0',500000000,32,32,1,0,"
                  "'Parameter' FROM audit WHERE step>0", (INVALID_UTF8,))
        c.execute("INSERT INTO ref SELECT id,'optimizer','AdamW',7,CAST(? AS TEXT),'group_param',900,0 FROM audit WHERE step>0",
                  (b"param_groups[0].\xe2\x80params[9]",))


def launcher_db(path):
    with sqlite3.connect(path) as c:
        c.executescript(SEED.read_text().replace("RANK_ID", "NULL"))
        for table in ("audit", "tensor", "ref", "event", "alloc"):
            c.execute(f"DELETE FROM {table}")
        c.execute("UPDATE run SET pid=4200, ppid=1, cupti='off: CUDA not initialized by the process', "
                  "argv='[\"torchrun\",\"--nproc_per_node\",\"2\",\"train.py\"]'")


def main():
    out, steps = Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 2
    out.mkdir(parents=True, exist_ok=True)
    launcher_db(out / "tpaudit-node0-4200.db")
    for rank, scale in ((0, 1.0), (1, 0.5)):
        rank_db(out / f"tpaudit-node0-{4242 + rank}.db", rank, scale, steps)


if __name__ == "__main__":
    main()
