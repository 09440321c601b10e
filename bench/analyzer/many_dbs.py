"""Benchmark of the analyzer over many small databases (a large job's
ranks): one real database is recorded by running a native host under
`tpaudit run` (bin/region_host: one stale tensor with a native stack), then
copied N times (default 10,000) with distinct pid and rank rows.  Times
`tpaudit report` (text, and JSON) and `tpaudit gate` on the directory, with
the default pool of threads and with TPAUDIT_JOBS=1 (one thread, the
baseline of the same run), and an older tpaudit given with --old.  Prints
wall and CPU seconds.

    python many_dbs.py BUILD_DIR [--n 10000] [--old OLD_TPAUDIT] [--keep DIR]
"""
import argparse
import os
import resource
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def make_dbs(tpaudit, host, root, n):
    one = root / "one"
    r = subprocess.run([tpaudit, "run", "-o", str(one), "--", host], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"recording the host failed: {r.stderr}")
    (src,) = one.glob("*.db")
    data = src.read_bytes()
    many = root / "many"
    many.mkdir()
    for rank in range(n):
        path = many / f"tpaudit-bench-{100000 + rank}.db"
        path.write_bytes(data)
        c = sqlite3.connect(path, isolation_level=None)
        c.execute("PRAGMA journal_mode=OFF")
        c.execute("PRAGMA synchronous=OFF")
        c.execute("UPDATE run SET pid=?, ppid=1, rank=?, world_size=?, local_rank=?", (100000 + rank, rank, n, rank % 8))
        c.close()
    return many


def timed(cmd, env=None):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    with open(os.devnull, "w") as null:
        r = subprocess.run(cmd, stdout=null, stderr=subprocess.PIPE, text=True, env=env)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return r.returncode, wall, cpu


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--old", help="an older tpaudit binary to time the same way")
    ap.add_argument("--keep", help="make (or reuse) the databases in DIR and keep them")
    args = ap.parse_args()
    tpaudit = os.path.join(args.build, "bin", "tpaudit")
    host = os.path.join(args.build, "bin", "region_host")
    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="tpaudit-many-"))
    root.mkdir(parents=True, exist_ok=True)
    many = root / "many"
    t0 = time.perf_counter()
    if not (many.is_dir() and len(list(many.glob("*.db"))) == args.n):
        shutil.rmtree(root / "one", ignore_errors=True)
        shutil.rmtree(many, ignore_errors=True)
        many = make_dbs(tpaudit, host, root, args.n)
    print(f"{args.n} databases ({sum(p.stat().st_size for p in many.glob('*.db')) >> 20} MiB) ready in "
          f"{time.perf_counter() - t0:.1f} s in {many}; {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}")
    one_thread = dict(os.environ, TPAUDIT_JOBS="1")
    rows = [("report (text)", [tpaudit, "report", many], None, 0),
            ("gate", [tpaudit, "gate", many], None, 1),
            ("report (text), 1 thread", [tpaudit, "report", many], one_thread, 0),
            ("gate, 1 thread", [tpaudit, "gate", many], one_thread, 1),
            ("report --format json", [tpaudit, "report", "--format", "json", many], None, 0)]
    if args.old:
        rows += [("old report (text)", [args.old, "report", many], None, 0),
                 ("old gate", [args.old, "gate", many], None, 1)]
    print(f"{'command':<28} {'wall s':>8} {'CPU s':>8} {'CPU ms/db':>10}")
    for name, cmd, env, want in rows:
        rc, wall, cpu = timed(cmd, env)
        assert rc == want, (name, rc)
        print(f"{name:<28} {wall:>8.2f} {cpu:>8.2f} {cpu * 1000 / args.n:>10.3f}", flush=True)
    if not args.keep:
        shutil.rmtree(root)


if __name__ == "__main__":
    sys.exit(main())
