"""Benchmark of the tpaudit analyzer: makes a synthetic directory of rank
databases (schema v1, by default 64 ranks, 10 million allocation events and
100,000 tensors in all), then times `tpaudit report` and `tpaudit gate` over
1, 2, 4, ..., 64 of them and reads their peak memory. Prints a table.

    python bench_analyzer.py BUILD_DIR [--ranks 64] [--events 10000000] [--tensors 100000]
"""
import argparse
import os
import resource
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SCHEMA_FROM = Path(__file__).resolve().parents[2] / "tests" / "analyzer" / "fixtures" / "seed.sql.in"


def schema_sql():
    text = SCHEMA_FROM.read_text()
    return "\n".join(l for l in text.splitlines() if l.startswith("CREATE") or l.startswith("PRAGMA"))


def make_rank(path, rank, ranks, events, tensors):
    c = sqlite3.connect(path)
    c.executescript("PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF;" + schema_sql())
    c.execute("INSERT INTO run VALUES(1,'0.1.0','bench',?,1,'[\"bench\"]','',0,0,?,0,1,?,?,?,0,0,'on',0,'on',NULL)",
              (1000 + rank, events * 10, rank, ranks, rank))
    c.execute("INSERT INTO audit VALUES(1,'step',1,?,?,?,?)", (events * 5, events * 5 + 1, rank, ranks))
    # Allocations: pairs of alloc/free over a rolling window of 256 live blocks.
    def alloc_rows():
        for i in range(events):
            block = i // 2
            op = "alloc" if i % 2 == 0 else "free"
            addr = 0x7f0000000000 + (block % 4096) * (1 << 22)
            yield (i, op, addr, 1 << 20, "device", 0, 1, 7, 0, "cupti", i, None, None)
    c.executemany("INSERT INTO alloc(ts_ns,op,address,bytes,memkind,device,context,stream,pool,source,correlation,label,stack_id)"
                  " VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?)", alloc_rows())
    rows, refs = [], []
    for k in range(tensors):
        key = 1 + k
        rows.append((1, key, f"layer{k // 4}.w{k % 4}", "[256,256]", "[256,256]", "float32", "cuda:0",
                     0x7e0000000000 + key * 262144, 262144, 262144, 1, 1, "Parameter"))
        stale = k % 100 == 0
        refs.append((1, "optimizer", "AdamW", 7, f"param_groups[0].params[{k}]", "group_param", key, 0))
        if not stale:
            refs.append((1, "module", "Model", 9, f"layer{k // 4}.w{k % 4}", "param", key, 0))
    c.executemany("INSERT INTO tensor VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?)", rows)
    c.executemany("INSERT INTO ref VALUES(?,?,?,?,?,?,?,?)", refs)
    c.commit()
    c.close()


def timed(cmd):
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    start = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return r.returncode, wall, max(peak, before) / 1024.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--events", type=int, default=10_000_000)
    ap.add_argument("--tensors", type=int, default=100_000)
    args = ap.parse_args()
    tpaudit = os.path.join(args.build, "bin", "tpaudit")
    root = Path(tempfile.mkdtemp(prefix="tpaudit-bench-"))
    per_events, per_tensors = args.events // args.ranks, args.tensors // args.ranks
    t0 = time.perf_counter()
    for rank in range(args.ranks):
        make_rank(root / f"tpaudit-bench-{rank:03d}.db", rank, args.ranks, per_events, per_tensors)
    print(f"generated {args.ranks} databases, {per_events * args.ranks} alloc events, "
          f"{per_tensors * args.ranks} tensors in {time.perf_counter() - t0:.1f} s ({root})")
    print(f"{'ranks':>5} {'events':>10} {'report s':>9} {'gate s':>7} {'s/Mevent':>9}")
    n = 1
    while n <= args.ranks:
        sub = root / f"sub{n}"
        sub.mkdir()
        for rank in range(n):
            os.symlink(root / f"tpaudit-bench-{rank:03d}.db", sub / f"tpaudit-bench-{rank:03d}.db")
        rc1, report_s, _ = timed([tpaudit, "report", "--format", "json", "-o", str(root / f"r{n}.json"), str(sub)])
        rc2, gate_s, _ = timed([tpaudit, "gate", str(sub)])
        assert rc1 == 0 and rc2 == 1, (rc1, rc2)
        ev = n * per_events
        print(f"{n:>5} {ev:>10} {report_s:>9.2f} {gate_s:>7.2f} {report_s / (ev / 1e6):>9.3f}")
        n *= 2
    # Peak memory of one full-directory report, measured alone.
    r = subprocess.run(["/usr/bin/time", "-v", tpaudit, "report", "-o", str(root / "full.txt"), str(root / f"sub{args.ranks}")],
                       capture_output=True, text=True)
    peak = [l for l in r.stderr.splitlines() if "Maximum resident" in l]
    print("peak RSS of the full report:", peak[0].split(":")[1].strip() + " KiB" if peak else "n/a")


if __name__ == "__main__":
    sys.exit(main())
