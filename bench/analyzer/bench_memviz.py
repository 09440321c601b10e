"""Benchmark of `tpaudit report --format memory-viz`: synthetic databases
(schema version 2, made with sqlite3 like tests/analyzer/memviz_db.py) of
the runs the export must handle in a few seconds, each timed against
`tpaudit report --format json` of the same database (the baseline, measured
in the same run), with the pickle's size:

  tprt-2000   a 2000-step tprt run audited at every step: 600 cudaMalloc'd
              tensors, no ledger (tprt records none), 4,000 CUPTI records
  hf-300      a 300-step Hugging Face run, every step audited: 40 ledger
              groups an audit (parameters and gradients by module, optimizer
              state, a holder that grows, autograd, cache), a sample a step,
              20,000 CUPTI records of the caching allocator and cuBLAS
  hf-2000     the same for 2000 steps (a long run, to see the scaling)

    python bench_memviz.py BUILD_DIR [--repeat 3]
"""
import argparse
import random
import sqlite3
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "analyzer"))
import growth_db  # noqa: E402

MIB = 1 << 20
TORCH = (0x7F00_0000_0000, "/venv/lib/python3.11/site-packages/torch/lib/libc10_cuda.so")
CUBLAS = (0x7F10_0000_0000, "/usr/local/cuda/lib64/libcublas.so.13")


def skeleton(path):
    c = sqlite3.connect(path)
    c.executescript("PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF;" + growth_db.SEED.replace("RANK_ID", "0"))
    c.executescript(growth_db.LEDGER_DDL)
    for t in ("audit", "tensor", "ref", "event", "alloc"):
        c.execute(f"DELETE FROM {t}")
    c.execute("UPDATE run SET cupti='on'")
    for mid, (base, lib) in enumerate((TORCH, CUBLAS), 1):
        c.execute("INSERT INTO module VALUES(?,?,?,?,?,NULL,0,NULL)", (mid, lib, base, base, base + 0x100_0000))
        ips = struct.pack("<QQ", base + 0x1000 + mid, base + 0x2000)
        c.execute("INSERT INTO stack VALUES(?,?,2,?)", (mid, mid, ips))
    return c


def allocations(c, n_events, t_end, seed):
    """n_events CUPTI records: 90% of PyTorch's segments (some freed again), 10% cuBLAS's."""
    rng = random.Random(seed)
    live, rows, calls = [], [], []
    addr = 0x7000_0000_0000
    for i in range(n_events):
        ts = t_end * i // n_events
        if live and rng.random() < 0.45:
            rows.append((ts, "free", live.pop(rng.randrange(len(live))), 0, None))
            continue
        size = rng.choice((2, 20, 64, 512)) * MIB
        lib = 2 if rng.random() < 0.1 else 1
        rows.append((ts, "alloc", addr, size, i + 1))
        calls.append((i + 1, ts, "cuMemAlloc_v2", lib))
        live.append(addr)
        addr += size + 0x10_0000
    c.executemany("INSERT INTO alloc(ts_ns,op,address,bytes,memkind,device,context,stream,pool,source,correlation)"
                  " VALUES(?,?,?,?,'device',0,1,7,0,'cupti',?)", rows)
    c.executemany("INSERT INTO api_call VALUES(?,?,?,1,?)", calls)


def tprt(path, steps=2000):
    c = skeleton(path)
    allocations(c, 4000, steps * 1_000_000, 1)
    c.executemany("INSERT INTO audit VALUES(?,'step',?,?,?,0,1)",
                  [(s, s, s * 1_000_000, s * 1_000_000 + 100) for s in range(1, steps + 1)])
    c.commit()
    c.close()


def hf(path, steps):
    c = skeleton(path)
    allocations(c, 20000, (steps + 1) * 1_000_000, 2)
    rng = random.Random(3)
    modules = [f"model.layers.{i}" for i in range(16)] + ["model.embed_tokens", "lm_head"]
    ledger, samples, audits = [], [], []
    for s in range(1, steps + 1):
        ts = s * 1_000_000
        audits.append((s, s, ts, ts + 100))
        groups = [("parameter", m, 40 * MIB) for m in modules] + [("gradient", m, 40 * MIB) for m in modules]
        groups += [("optimizer_state", "AdamW", 1440 * MIB), ("held", "__main__.history", s * 4 * MIB),
                   ("autograd", "autograd graph of __main__.loss", rng.randrange(0, 200) * MIB),
                   ("allocator_cache", None, rng.randrange(100, 900) * MIB)]
        total = sum(b for _, _, b in groups)
        ledger += [(s, k, o, b) for k, o, b in groups] + [(s, "measured", "torch.cuda.memory_reserved", total)]
        samples.append((s, ts - 500, total - 600 * MIB, total))
    c.executemany("INSERT INTO audit VALUES(?,'step',?,?,?,0,1)", audits)
    c.executemany("INSERT INTO ledger VALUES(?,'cuda:0',?,?,NULL,?,?,1,NULL,'float32',0,NULL)",
                  [(a, k, o, o, b) for a, k, o, b in ledger])
    c.executemany("INSERT INTO sample VALUES(?,?,'cuda:0',?,?,NULL)", samples)
    c.commit()
    c.close()


def best(cmd, repeat):
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        r = subprocess.run(cmd, capture_output=True)
        times.append(time.perf_counter() - t)
        assert r.returncode == 0, r.stderr.decode()
    return min(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    tpaudit = str(Path(args.build) / "bin" / "tpaudit")
    cases = [("tprt-2000", lambda p: tprt(p)), ("hf-300", lambda p: hf(p, 300)), ("hf-2000", lambda p: hf(p, 2000))]
    print("| run | database | json report (baseline) | memory-viz | ratio | pickle | entries kept | --max-events 20000 |")
    print("|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for name, make in cases:
            db = Path(tmp) / f"tpaudit-{name}.db"
            make(str(db))
            out = Path(tmp) / f"{name}.pickle"
            small = Path(tmp) / f"{name}-small.pickle"
            base = best([tpaudit, "report", "--format", "json", "-o", "/dev/null", db], args.repeat)
            viz = best([tpaudit, "report", "--format", "memory-viz", "-o", out, db], args.repeat)
            best([tpaudit, "report", "--format", "memory-viz", "--max-events", "20000", "-o", small, db], 1)
            import pickle
            snap = pickle.loads(out.read_bytes())
            kept = sum(len(t) for t in snap["device_traces"])
            print(f"| {name} | {db.stat().st_size / MIB:.1f} MiB | {base:.2f} s | {viz:.2f} s | {viz / base:.2f} | "
                  f"{out.stat().st_size / MIB:.2f} MiB | {kept:,} (left out {snap['tpaudit']['entries_left_out']:,}) | "
                  f"{small.stat().st_size / MIB:.2f} MiB |")


if __name__ == "__main__":
    main()
