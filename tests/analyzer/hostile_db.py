"""Builders of hostile tpaudit databases for test_hostile.py: the fixed
seed database (fixtures/seed.sql.in) with hostile strings and numbers put
into every field the analyzer reads, with many stale tensors carrying real
native stacks, with one very deep stack, with many audits, or written
concurrently by another process.  Every database is a real SQLite file in schema v1."""
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SEED = (HERE / "fixtures" / "seed.sql.in").read_text()

# Bytes that must never reach a terminal or break JSON/XML: ESC sequences
# (colour, title, cursor), a newline that fakes a report line, a C1 control,
# DEL, a bidi override, invalid UTF-8 (lone continuation, overlong, surrogate,
# truncated sequence) and characters that matter to JSON, XML and HTML.
HOSTILE_TEXT = (b"\x1b[31mRED\x1b]0;title\x07\x1b[2J\nINJECTED line\r\x9b\xc2\x9b\x7f\xe2\x80\xae"
                b"\x80\xc0\xaf\xed\xa0\x80\xf4\x90\x80\x80\xe2\x82" b"</x>\"'&<script>\\u0000]}{")
BIG = 2 ** 63 - 1
SMALL = -(2 ** 63)

STRING_FIELDS = {
    "run": ["host", "argv", "cupti", "python", "tool_version"],
    "tensor": ["name", "shape", "local_shape", "dtype", "device", "type"],
    "ref": ["holder_class", "path"],
    "event": ["name", "holder_class", "detail", "py_stack"],
    "module": ["path"],
}


def seed(path, rank=0):
    with sqlite3.connect(path) as c:
        c.executescript(SEED.replace("RANK_ID", str(rank)))
    return path


def set_text(db, table, column, value=HOSTILE_TEXT):
    """Stores `value` (bytes, possibly invalid UTF-8) as TEXT in every row."""
    with sqlite3.connect(db) as c:
        c.execute(f"UPDATE {table} SET {column}=CAST(? AS TEXT)", (value,))


def set_number(db, table, column, value):
    with sqlite3.connect(db) as c:
        c.execute(f"UPDATE {table} SET {column}=?", (value,))


def hostile_cases(tmp):
    """(name, path) for every hostile field; each is a full seed database."""
    cases = []
    for table, columns in STRING_FIELDS.items():
        for column in columns:
            db = seed(tmp / f"str-{table}-{column}.db")
            if table == "module":
                with sqlite3.connect(db) as c:
                    c.execute("INSERT INTO stack VALUES(1, 1, 2, ?)", ((1048576 + 16).to_bytes(8, "little") * 2,))
                    c.execute("INSERT INTO module VALUES(1, 'x', 0, 0, 4294967296, NULL, 0, NULL)")
                    c.execute("UPDATE alloc SET stack_id=1")
            set_text(db, table, column)
            cases.append((f"{table}.{column}", db))
    for value in ("[}\"{]", "[1,,-]", "[\"a\",1]", "[9223372036854775808]", "[" * 10000, "{}", "", "null"):
        for table, column in (("run", "argv"), ("tensor", "shape"), ("tensor", "local_shape")):
            db = seed(tmp / f"json-{table}-{column}-{len(cases)}.db")
            set_text(db, table, column, value.encode())
            cases.append((f"{table}.{column}={value[:12]}", db))
    numbers = [
        ("tensor", "storage_bytes"), ("tensor", "storage_ptr"), ("tensor", "nbytes"), ("alloc", "bytes"),
        ("alloc", "ts_ns"), ("alloc", "address"), ("audit", "begin_ns"), ("audit", "step"), ("run", "pid"),
        ("run", "rank"), ("run", "world_size"), ("run", "dropped_events"), ("run", "cupti_dropped"),
        ("run", "complete"), ("ref", "tensor_key"), ("ref", "peer_key"), ("event", "ts_ns"), ("event", "old_key"),
    ]
    for table, column in numbers:
        for value in (BIG, SMALL, -1, 1e300, "text"):
            db = seed(tmp / f"num-{table}-{column}-{len(cases)}.db")
            set_number(db, table, column, value)
            cases.append((f"{table}.{column}={value}", db))
    # Retained bytes that would cancel: two stale tensors, one negative.
    db = seed(tmp / "cancel.db")
    with sqlite3.connect(db) as c:
        c.execute("INSERT INTO tensor VALUES(1,101,'neg.weight','[1]','[1]','float32','cuda:0',9000000,-154389504,4,1,0,'Parameter')")
        c.execute("INSERT INTO ref VALUES(1,'optimizer','AdamW',7,'param_groups[0].params[2]','group_param',101,0)")
        c.execute("INSERT INTO tensor VALUES(1,102,'big.weight','[1]','[1]','float32','cuda:0',9100000,?,4,1,0,'Parameter')", (BIG,))
        c.execute("INSERT INTO ref VALUES(1,'optimizer','AdamW',7,'param_groups[0].params[3]','group_param',102,0)")
        c.execute("INSERT INTO tensor VALUES(1,103,'big2.weight','[1]','[1]','float32','cuda:0',9200000,?,4,1,0,'Parameter')", (BIG,))
        c.execute("INSERT INTO ref VALUES(1,'optimizer','AdamW',7,'param_groups[0].params[4]','group_param',103,0)")
    cases.append(("cancel", db))
    # Optimizer state of a stale param whose storage sizes overflow a sum.
    db = seed(tmp / "state-overflow.db")
    with sqlite3.connect(db) as c:
        for key, ptr, path in ((401, 500000000, "exp_avg"), (402, 500010000, "exp_avg_sq"), (403, 500020000, "neg")):
            c.execute("INSERT INTO tensor VALUES(1,?,NULL,'[768]','[768]','float32','cuda:0',?,?,3072,0,0,'Tensor')",
                      (key, ptr, -BIG if path == "neg" else BIG))
            c.execute("INSERT INTO ref VALUES(1,'optimizer','AdamW',7,?,'state',?,100)", (f"state[x].{path}", key))
    cases.append(("state-overflow", db))
    # A stack blob shorter than its depth, and a huge depth.
    db = seed(tmp / "short-stack.db")
    with sqlite3.connect(db) as c:
        c.execute("INSERT INTO stack VALUES(1, 1, 2147483647, x'0102')")
        c.execute("UPDATE alloc SET stack_id=1")
    cases.append(("stack.depth", db))
    return cases


def many_audits(path, audits, params, generic, stale):
    """The seed database's schema with `audits` closed step audits, each of
    `params` live params (also group params), `generic` generic masters
    (group params never registered as params, with a gradient) and `stale`
    stale params (params in the first audit only), on one rank."""
    schema = "\n".join(l for l in SEED.splitlines() if l.startswith(("CREATE ", "PRAGMA ")))
    with sqlite3.connect(path) as c:
        c.executescript(schema)
        c.execute("INSERT INTO run VALUES(1,'0.1.0','node0',4242,4200,'[\"python\"]',NULL,1000,0,?,0,1,0,1,0,0,0,'on',0,'on',NULL)",
                  (100 * audits + 50,))
        for a in range(1, audits + 1):
            c.execute("INSERT INTO audit VALUES(?,'step',?,?,?,0,1)", (a, a, 100 * a, 100 * a + 10))
            tensors, refs = [], []
            for k in range(1, params + generic + stale + 1):
                tensors.append((a, k, f"p{k}", "[64]", "[64]", "float32", "cuda:0", 4096 * k, 256, 256, 1, 1, "Parameter"))
                refs.append((a, "optimizer", "AdamW", 7, f"param_groups[0].params[{k}]", "group_param", k, 0))
                if k <= params or (k > params + generic and a == 1):
                    refs.append((a, "module", "Net", 9, f"p{k}", "param", k, 0))
            c.executemany("INSERT INTO tensor VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?)", tensors)
            c.executemany("INSERT INTO ref VALUES(?,?,?,?,?,?,?,?)", refs)
    return path


def text_symbols(binary):
    """(address, size) of the function symbols of an ELF file with nm."""
    out = subprocess.run(["nm", "-S", "--defined-only", str(binary)], capture_output=True, text=True).stdout
    syms = []
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[2] in "tT" and int(parts[1], 16) > 1:
            syms.append((int(parts[0], 16), int(parts[1], 16)))
    return syms


def native_stale_db(path, binary, n_stale, depth, stack_depth_of_first=None):
    """A database with n_stale stale tensors, each in a device allocation
    whose native stack of `depth` frames lies in `binary` (a real ELF file
    with debug info, mapped at BASE); the first stack may be deeper."""
    base = 0x7F0000000000
    syms = text_symbols(binary)
    seed(path)
    with sqlite3.connect(path) as c:
        c.execute("INSERT INTO module VALUES(1, ?, ?, ?, ?, NULL, 0, NULL)", (str(binary), base, base, base + (1 << 32)))
        for i in range(n_stale):
            frames = stack_depth_of_first if (i == 0 and stack_depth_of_first) else depth
            ips = b"".join((base + syms[(i + k) % len(syms)][0] + 1).to_bytes(8, "little") for k in range(frames))
            key, ptr = 10000 + i, (1 << 40) + i * 4096
            c.execute("INSERT INTO stack VALUES(?, ?, ?, ?)", (i + 1, i, frames, ips))
            c.execute("INSERT INTO alloc VALUES(?, 950, 'alloc', ?, 4096, 'device', 0, 1, 7, 0, 'cupti', NULL, NULL, ?)",
                      (100 + i, ptr, i + 1))
            c.execute("INSERT INTO tensor VALUES(1, ?, ?, '[1024]', '[1024]', 'float32', 'cuda:0', ?, 4096, 4096, 1, 0, 'Parameter')",
                      (key, f"layer{i}.weight", ptr))
            c.execute("INSERT INTO ref VALUES(1, 'optimizer', 'AdamW', 7, ?, 'group_param', ?, 0)",
                      (f"param_groups[0].params[{i + 2}]", key))
    return path


def writer_main(path, seconds):
    """Writes `path` the way the shim does (WAL, one transaction per batch)
    for `seconds`: audits with tensors, refs and allocations come and go
    (a window of 3 audits, so a read stays cheap), with checkpoints."""
    c = sqlite3.connect(path, isolation_level=None)
    c.execute("PRAGMA journal_mode=WAL")
    c.executescript(SEED.replace("RANK_ID", "0"))
    c.execute("UPDATE run SET complete=0")
    end = time.time() + seconds
    n = 0
    while time.time() < end:
        c.execute("BEGIN")
        audit = 2 + n
        c.execute("INSERT INTO audit VALUES(?, 'step', ?, ?, NULL, 0, 2)", (audit, audit, 6000 + n))
        for k in range(10):
            key = 1000000 + n * 100 + k
            c.execute("INSERT INTO tensor VALUES(?, ?, ?, '[64]', '[64]', 'float32', 'cuda:0', ?, 256, 256, 1, 0, 'Parameter')",
                      (audit, key, f"w{k}", key * 256))
            c.execute("INSERT INTO ref VALUES(?, 'optimizer', 'AdamW', 7, 'p', 'group_param', ?, 0)", (audit, key))
            c.execute("INSERT INTO alloc VALUES(NULL, ?, 'alloc', ?, 256, 'device', 0, 1, 7, 0, 'cupti', NULL, NULL, NULL)",
                      (7000 + n, key * 256))
        c.execute("UPDATE audit SET end_ns=? WHERE id=?", (6500 + n, audit))
        if n >= 3:
            old = audit - 3
            for table, column in (("tensor", "audit_id"), ("ref", "audit_id"), ("audit", "id")):
                c.execute(f"DELETE FROM {table} WHERE {column}=?", (old,))
            c.execute("DELETE FROM alloc WHERE ts_ns=?", (7000 + n - 3,))
        c.execute("COMMIT")
        time.sleep(0.002)
        n += 1
        if n % 10 == 0:
            c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    c.execute("UPDATE run SET complete=1")
    c.close()


if __name__ == "__main__":
    writer_main(sys.argv[1], float(sys.argv[2]))
