"""Databases with CUPTI's device allocations for the memory viewer's export
(`tpaudit report --format memory-viz`), built with sqlite3 on top of
growth_db.py's memory-growth run: PyTorch's caching allocator's segments
(stacks in libc10_cuda.so), a cuBLAS workspace (stacks in libcublas.so.13),
a segment freed by empty_cache, a list that keeps 196 MiB a step, the seed
bug's stale embedding, step samples with live and reserved bytes, and an
audit labelled 'oom' before the exit audit.

    python memviz_db.py OUTDIR [STEPS] [RANKS]
"""
import sqlite3
import struct
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import growth_db  # noqa: E402

MIB = growth_db.MIB
TORCH_LIB = (0x7F00_0000_0000, "/opt/venv/lib/python3.11/site-packages/torch/lib/libc10_cuda.so")
CUBLAS_LIB = (0x7F10_0000_0000, "/usr/local/cuda/lib64/libcublas.so.13")
STALE = 154389504  # transformer.wte.weight, kept by the optimizer
OOM_ASKED, OOM_FREE = 2 << 30, 1288490188  # the failed allocation: 2 GiB asked, 1.2 GiB free


def _stack(c, sid, base):
    ips = [base + 0x1234 + sid * 16, base + 0x5678]
    c.execute("INSERT INTO stack VALUES(?,?,?,?)", (sid, sid, len(ips), b"".join(struct.pack("<Q", ip) for ip in ips)))


def _alloc(c, ts, op, address, size, corr):
    c.execute("INSERT INTO alloc(ts_ns,op,address,bytes,memkind,device,context,stream,pool,source,correlation)"
              " VALUES(?,?,?,?,'device',0,1,7,0,'cupti',?)", (ts, op, address, size, corr))


def build(path, steps=12, rank=0):
    audits = [(s, growth_db.leak(s)) for s in range(1, steps + 1)] + [(-1, growth_db.leak(steps))]
    growth_db.build(path, audits, stale=True, rank=rank)
    c = sqlite3.connect(path)
    c.execute("UPDATE run SET cupti='on'")
    for mid, (base, lib) in enumerate((TORCH_LIB, CUBLAS_LIB), 1):
        c.execute("INSERT INTO module VALUES(?,?,?,?,?,NULL,0,NULL)", (mid, lib, base, base, base + 0x100_0000))
    _stack(c, 1, TORCH_LIB[0])
    _stack(c, 2, CUBLAS_LIB[0])
    corr = 0

    def call(ts, stack):
        nonlocal corr
        corr += 1
        c.execute("INSERT INTO api_call VALUES(?,?,?,1,?)", (corr, ts, "cuMemAlloc_v2", stack))
        return corr

    # the stale embedding's ledger row, and samples that know live and reserved bytes
    for (audit_id,) in c.execute("SELECT id FROM audit").fetchall():
        c.execute("INSERT INTO ledger VALUES(?,'cuda:0','stale','AdamW',NULL,'AdamW',?,1,'[[50257,768]]','float32',0,NULL)",
                  (audit_id, STALE))
        c.execute("UPDATE ledger SET bytes=bytes+? WHERE audit_id=? AND owner_kind='measured'", (STALE, audit_id))
    reserved = 0
    segments = []
    need = lambda step: 3 * growth_db.PARAMS + growth_db.leak(step) + STALE + 64 * MIB  # noqa: E731
    address = 0x7000_0000_0000
    _alloc(c, 900, "alloc", 0x7800_0000_0000, 32 * MIB, call(900, 2))  # cuBLAS's workspace
    _alloc(c, 950, "alloc", 0x7900_0000_0000, 20 * MIB, call(950, 1))  # freed by empty_cache
    _alloc(c, 960, "free", 0x7900_0000_0000, 0, None)
    for step in range(1, steps + 2):
        ts = 10_000 * step - 100
        while reserved < need(min(step, steps)):
            size = 2048 * MIB if not segments else 512 * MIB
            _alloc(c, ts, "alloc", address, size, call(ts, 1))
            segments.append(address)
            reserved += size
            address += size + 0x1000_0000
            ts += 1
        live = need(min(step, steps)) - 40 * MIB + (step % 3) * MIB
        c.execute("UPDATE sample SET live_bytes=?, reserved_bytes=? WHERE step=?", (live, reserved, step))
    c.execute("DELETE FROM sample WHERE step > ?", (steps + 1,))
    # an out-of-memory audit just before exit
    c.execute("INSERT INTO audit VALUES(?,'oom',?,?,?,?,2)", (steps + 10, steps, 10_000 * steps + 5000,
                                                               10_000 * steps + 5100, rank))
    # and its failed allocation (the oom table of schema 3; shim/records.h): 2 GiB asked, 1.2 GiB free
    c.execute("CREATE TABLE oom (id INTEGER PRIMARY KEY, ts_ns INTEGER NOT NULL, seq INTEGER NOT NULL, "
              "source TEXT NOT NULL, api TEXT, device INTEGER, requested INTEGER NOT NULL, free_bytes INTEGER, "
              "total_bytes INTEGER, reserved_free INTEGER, largest_free INTEGER, audit_id INTEGER, step INTEGER, "
              "py_stack TEXT, stack_id INTEGER)")
    c.execute("INSERT INTO oom VALUES(1,?,1,'torch','cudaMalloc',0,?,?,?,?,?,?,?,NULL,NULL)",
              (10_000 * steps + 4990, OOM_ASKED, OOM_FREE, 80 << 30, 64 * MIB, 32 * MIB, steps + 10, steps))
    c.commit()
    c.close()
    return path


def main():
    out = Path(sys.argv[1])
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 12
    ranks = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    out.mkdir(parents=True, exist_ok=True)
    for rank in range(ranks):
        build(str(out / f"tpaudit-node0-{4242 + rank}.db"), steps, rank)


if __name__ == "__main__":
    main()
