"""test_schema.py - the schema has one description (shim/records.h) and its
copies agree with it: the live schema of a database the shim writes
(pragma table_info, index_list, user_version) must equal docs/schema.md's
SQL block and the analyzer's seed fixture (which may lack only columns added
since, each nullable or with a default, as older files do), and every
tensor, ref and event column a caller supplies must be a field of
include/tpaudit.h's structs and of the probe's ctypes structs, which the
build generates from the header (python/structs.cmake -> _structs.py) and
which must lay out as the compiler lays out the header (struct_layout).

usage: test_schema.py LIBTPAUDIT BINDIR SOURCE_DIR
"""
import ctypes
import glob
import importlib.util
import os
import re
import sqlite3
import subprocess
import sys
import tempfile

# The seed fixture is a file from before run.ended_by and tensor.storage_offset
# existed: the analyzer must keep reading such files, so the fixture keeps that
# shape on purpose (it may lack trailing columns an older file lacks).
# Tables added after schema version 1 (ledger and sample in 2, oom in 3): a version 1 file (the seed fixture) has none of them.
AFTER_V1 = {"ledger", "sample", "oom", "phase_mark", "peak_part"}
# A struct whose records go to another table too (a sample with a phase is a phase_mark row).
ALSO_WRITES = {"sample": ("phase_mark",)}
# Columns the shim fills itself (not from the caller's struct).
SHIM_MADE = {"audit_id", "id", "ts_ns", "stack_id"}
# Struct fields that are no column of their own.
NOT_COLUMNS = {"struct_size", "ndim", "local_ndim", "capture_native"}
FAILS = []


def check(ok, what):
    if not ok:
        FAILS.append(what)
        print("FAIL:", what)


def differ(got, want):
    """(name, type, notnull, default, pk) rows only one side has, or the order."""
    got, want = got or [], want or []
    only = sorted(set(got) ^ set(want), key=str)
    return f"only one side: {only}" if only else f"column order {[c[0] for c in got]}"


def schema_of(db):
    tables = [r[0] for r in db.execute("select name from sqlite_master where type='table' order by name")]
    cols = {t: [tuple(r[1:]) for r in db.execute(f"pragma table_info({t})")] for t in tables}
    idx = {}
    for t in tables:
        for r in db.execute(f"pragma index_list({t})"):
            if r[3] == "c":  # created by CREATE INDEX, not by a constraint
                idx[r[1]] = (t, [c[2] for c in db.execute(f"pragma index_info({r[1]})")])
    return cols, idx, db.execute("pragma user_version").fetchone()[0]


def from_script(sql):
    db = sqlite3.connect(":memory:")
    db.executescript(sql)
    return schema_of(db)


def live_schema(lib, bindir):
    with tempfile.TemporaryDirectory() as out:
        env = dict(os.environ, TPAUDIT_OUT=out, LD_PRELOAD=lib)
        rc = subprocess.run([os.path.join(bindir, "shim_api_host"), "loaded"], env=env, capture_output=True).returncode
        check(rc == 0, f"shim_api_host exit status {rc}")
        (path,) = glob.glob(os.path.join(out, "*.db"))
        db = sqlite3.connect(path)
        for t in ("tensor", "ref", "event", "alloc", "audit", "ledger", "sample", "oom"):
            check(db.execute(f"select count(*) from {t}").fetchone()[0] > 0, f"the host wrote no {t} row")
        offsets = [r[0] for r in db.execute("select storage_offset from tensor order by key")]
        check(offsets == [0, 7, 14], f"tensor.storage_offset {offsets}, the host recorded [0, 7, 14]")
        s = schema_of(db)
        db.close()
        return s


def docs_schema(src):
    text = open(os.path.join(src, "docs", "schema.md")).read()
    block = re.search(r"```sql\n(.*?)```", text, re.S).group(1)
    return from_script(block)


def seed_schema(src):
    text = open(os.path.join(src, "tests", "analyzer", "fixtures", "seed.sql.in")).read()
    return from_script("\n".join(l for l in text.splitlines() if l.startswith("CREATE ")))


def c_struct_fields(src, name):
    text = open(os.path.join(src, "include", "tpaudit.h")).read()
    body = re.search(r"typedef struct %s \{(.*?)\} %s_t;" % (name, name), text, re.S).group(1)
    body = re.sub(r"/\*.*?\*/", "", body, flags=re.S)
    return [re.findall(r"(\w+)\s*(?:\[\w+\])?\s*;", d + ";")[0] for d in body.split(";") if d.strip()]


def native_structs(bindir):
    path = os.path.join(bindir, "..", "share", "tpaudit", "python", "tpaudit", "_structs.py")
    spec = importlib.util.spec_from_file_location("tpa_structs", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return {"tensor": mod.TensorStruct, "ref": mod.RefStruct, "event": mod.EventStruct,
            "ledger": mod.LedgerStruct, "sample": mod.SampleStruct}


def c_layout(bindir):
    """{struct: {field: (offset, size)}, with "sizeof": (0, size)} as compiled."""
    out = subprocess.run([os.path.join(bindir, "struct_layout")], capture_output=True, text=True, check=True).stdout
    layout = {}
    for line in out.splitlines():
        struct, field, offset, size = line.split()
        layout.setdefault(struct, {})[field] = (int(offset), int(size))
    return layout


def seed_may_lack(live, seed):
    """The trailing columns of `live` beyond `seed`'s, when each is nullable or
    has a default (a column an older file does not have)."""
    extra = live[len(seed):]
    if live[:len(seed)] != seed or not extra:
        return []
    return [c[0] for c in extra if not c[2] or c[3] is not None]


def main():
    lib, bindir, src = sys.argv[1:4]
    live_cols, live_idx, live_ver = live_schema(lib, bindir)
    doc_cols, doc_idx, doc_ver = docs_schema(src)
    for t in sorted(set(live_cols) | set(doc_cols)):
        check(live_cols.get(t) == doc_cols.get(t),
              f"docs/schema.md table {t} differs from the shim's: {differ(doc_cols.get(t), live_cols.get(t))}")
    check(live_idx == doc_idx, f"docs/schema.md indexes {doc_idx}, the shim's {live_idx}")
    check(live_ver == doc_ver, f"docs/schema.md user_version {doc_ver}, the shim's {live_ver}")

    seed_cols, seed_idx, _ = seed_schema(src)
    lacking = 0
    for t in sorted((set(live_cols) | set(seed_cols)) - (AFTER_V1 - set(seed_cols))):
        lacks = seed_may_lack(live_cols.get(t, []), seed_cols.get(t, []))
        lacking += len(lacks)
        want = [c for c in live_cols.get(t, []) if c[0] not in lacks]
        check(seed_cols.get(t) == want, f"seed.sql.in table {t} differs: {differ(seed_cols.get(t), want)}")
    v1_idx = {i: v for i, v in live_idx.items() if v[0] not in AFTER_V1 or v[0] in seed_cols}
    check(seed_idx == v1_idx, f"seed.sql.in indexes {seed_idx}, the shim's {v1_idx}")
    check(lacking > 0, "seed.sql.in has every column: it no longer stands for an older file")

    layout = c_layout(bindir)
    for table, struct in native_structs(bindir).items():
        py = [f[0] for f in struct._fields_]
        c = c_struct_fields(src, "tpaudit_" + table)
        check(py == c, f"_structs.py {struct.__name__} fields {py}, tpaudit.h's {c}")
        compiled = {f: (getattr(struct, f).offset, getattr(struct, f).size) for f in py}
        compiled["sizeof"] = (0, ctypes.sizeof(struct))
        check(compiled == layout.get(table), f"{struct.__name__} lays out as {compiled}, the compiler as {layout.get(table)}")
        columns = {c[0] for t in (table,) + ALSO_WRITES.get(table, ()) for c in live_cols[t]} - SHIM_MADE
        check(columns == set(py) - NOT_COLUMNS,
              f"{table}: columns {sorted(columns)}, the caller's fields {sorted(set(py) - NOT_COLUMNS)}")
    if FAILS:
        return 1
    print(f"schema: {len(live_cols)} tables agree in the shim, docs/schema.md, seed.sql.in, tpaudit.h, _structs.py")
    return 0


if __name__ == "__main__":
    sys.exit(main())
