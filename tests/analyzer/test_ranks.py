"""The analyzer over many ranks and processes: broken *.db links in a
directory, private snapshots of an analyzer killed mid-read, helper
processes of a rank (torch.compile workers, a child that imports torch)
folded under it, and the same finding on several ranks printed once.
Needs TPAUDIT_BUILD (the build tree)."""
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import hostile_db  # noqa: E402

BUILD = Path(os.environ["TPAUDIT_BUILD"])
SRC = Path(__file__).resolve().parents[2]
TPAUDIT = str(BUILD / "bin" / "tpaudit")
SEED = (SRC / "tests" / "analyzer" / "fixtures" / "seed.sql.in").read_text()
RANK_HELPERS = SRC / "tests" / "analyzer" / "scenarios" / "rank_helpers.py"


def tpaudit(*args, **kw):
    return subprocess.run([TPAUDIT, *map(str, args)], capture_output=True, text=True, timeout=300, **kw)


def seed_ranks(d, n, **updates):
    """n databases of the seed fixture (one stale tensor), ranks 0..n-1, each its own pid."""
    d.mkdir(exist_ok=True)
    for rank in range(n):
        with sqlite3.connect(d / f"tpaudit-node0-{5000 + rank}.db") as c:
            c.executescript(SEED.replace("RANK_ID", str(rank)))
            c.execute("UPDATE run SET pid=?, world_size=?", (5000 + rank, n))
            for column, value in updates.items():
                c.execute(f"UPDATE run SET {column}=?", (value,))
    return d


def test_broken_links_are_skipped_with_one_warning(tmp_path):
    d = seed_ranks(tmp_path / "runs", 1)
    (d / "dangling.db").symlink_to(tmp_path / "nowhere.db")
    (d / "loop.db").symlink_to(d / "loop.db")
    (d / "dir.db").symlink_to(tmp_path)
    os.mkfifo(d / "fifo.db")
    for verb in ("report", "gate"):
        r = tpaudit(verb, d)
        assert r.returncode == (0 if verb == "report" else 1), r.stderr
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("tpaudit: warning: skipped 2 *.db links"), r.stderr
    assert tpaudit("report", d).stdout.startswith("tpaudit report: 1 rank,")
    only = tmp_path / "only-links"
    only.mkdir()
    (only / "x.db").symlink_to(tmp_path / "nowhere.db")
    r = tpaudit("report", only)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "only links to nothing" in r.stderr


def snapshots(tmp):
    return sorted(p.name for p in tmp.iterdir() if p.name.startswith("tpaudit-read-"))


def test_killed_mid_read_leaves_no_snapshot_behind(tmp_path):
    """kill -9 while the analyzer copies databases that have a WAL: whatever
    it left in $TMPDIR is gone after the next start; a copy of an analyzer
    still running is kept; a finished read leaves nothing."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    d = tmp_path / "wal"
    d.mkdir()
    writers = []
    for i in range(6):  # WAL databases kept open with 8 MiB uncheckpointed (a run still writing)
        c = sqlite3.connect(d / f"r{i}.db", isolation_level=None)
        c.execute("PRAGMA journal_mode=WAL")
        c.executescript(SEED.replace("RANK_ID", str(i)))
        c.execute("PRAGMA wal_autocheckpoint=0")
        c.execute("CREATE TABLE pad(x BLOB)")
        c.execute("INSERT INTO pad VALUES(zeroblob(8388608))")
        writers.append(c)
    env = dict(os.environ, TMPDIR=str(tmp))
    left = []
    for _ in range(30):
        p = subprocess.Popen([TPAUDIT, "report", "--format", "json", d], env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 20
        while not snapshots(tmp) and p.poll() is None and time.monotonic() < deadline:
            time.sleep(0.0005)
        p.send_signal(signal.SIGKILL)
        p.wait()
        left = snapshots(tmp)
        if left:
            break
    assert left, "no kill landed while a snapshot was being made"
    alive = tmp / f"tpaudit-read-{os.getpid()}-keep"  # this process is alive: its copy stays
    alive.mkdir()
    r = tpaudit("report", hostile_db.seed(tmp_path / "plain.db"), env=env)
    assert r.returncode == 0, r.stderr
    assert snapshots(tmp) == [alive.name], snapshots(tmp)
    alive.rmdir()
    r = tpaudit("gate", d, env=env)
    assert r.returncode in (0, 1), r.stderr
    assert snapshots(tmp) == []
    for c in writers:
        c.close()


def test_same_finding_on_eight_ranks_prints_once(tmp_path):
    d = seed_ranks(tmp_path / "runs", 8)
    text = tpaudit("report", d).stdout
    assert text.startswith("tpaudit report: 8 ranks, 16 errors"), text[:200]
    assert "per rank (as the gate judges, each rank alone): at most 147.2 MiB retained on one rank (rank 0)" in text
    findings = text.split("\nfindings:\n")[1].split("\ndetails:\n")[0].splitlines()
    stale = [l for l in findings if "stale_param" in l]
    assert len(stale) == 1 and "ranks 0-7" in stale[0] and stale[0].endswith("147.2 MiB each"), findings
    details = text.split("\ndetails:\n")[1]
    assert len(re.findall(r"^  \[\d+\] stale_param \(error\), ranks 0-7,", details, re.M)) == 1, details[:500]
    html = tpaudit("report", "--format", "html", d).stdout
    table = html.split('id="findings-table"')[1].split("</table>")[0]
    rows = [row for row in table.split("<tr>") if "stale_param" in row]
    assert len(rows) == 1 and "ranks 0-7" in rows[0] and "each" in rows[0], rows
    assert "on one rank (what the gate judges)" in html
    doc = json.loads(tpaudit("report", "--format", "json", d).stdout)  # JSON keeps every rank's finding
    assert sorted(f["rank"] for f in doc["findings"] if f["kind"] == "stale_param") == list(range(8))
    assert [e["rank"] for e in doc["totals"]["by_rank"]] == list(range(8))
    gate = tpaudit("gate", "--max-retained", "0", d)
    assert gate.returncode == 1 and len(re.findall(r"FAIL max-retained on rank \d", gate.stdout)) == 8, gate.stdout
    # A rank whose bytes differ is its own group.
    with sqlite3.connect(d / "tpaudit-node0-5003.db") as c:
        c.execute("UPDATE tensor SET storage_bytes=storage_bytes/2 WHERE key=100")
    text = tpaudit("report", d).stdout
    assert "ranks 0-2, 4-7" in text and re.search(r"^  error +rank 3 +stale_param", text, re.M), text


def test_helper_without_model_folds_under_its_rank(tmp_path):
    d = seed_ranks(tmp_path / "runs", 2)
    for rank, pid in ((0, 7000), (0, 7001), (1, 7002)):  # children of the ranks that never built a model
        with sqlite3.connect(d / f"tpaudit-node0-{pid}.db") as c:
            c.executescript(SEED.replace("RANK_ID", str(rank)))
            c.execute("UPDATE run SET pid=?, ppid=?", (pid, 5000 + rank))
            c.execute("DELETE FROM ref")
            c.execute("DELETE FROM event")
    text = tpaudit("report", d).stdout
    assert text.startswith("tpaudit report: 2 ranks (and 3 helper processes), 4 errors"), text[:200]
    assert "helper processes (no model or optimizer): pid 7000, 7001" in text
    gate = tpaudit("gate", d)
    assert len(re.findall(r"max-retained on rank 0", gate.stdout)) == 1, gate.stdout
    doc = json.loads(tpaudit("report", "--format", "json", d).stdout)
    assert len(doc["runs"]) == 5 and [e["rank"] for e in doc["totals"]["by_rank"]] == [0, 1]


def rank_helpers_run(tmp_path, name, *args):
    out = tmp_path / name
    env = dict(os.environ, TPAUDIT_AUDIT="1,2", TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "inductor"))
    r = tpaudit("run", "-o", out, "--", sys.executable, RANK_HELPERS, *args, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    return out


def test_compile_workers_of_two_gloo_ranks_are_not_ranks(tmp_path):
    """A real 2-rank gloo run under torch.compile: each rank's compile
    workers and its child are helpers, so the report shows 2 ranks."""
    out = rank_helpers_run(tmp_path, "stale", "--stale")
    dbs = list(out.glob("*.db"))
    runs = []
    for db in dbs:
        with sqlite3.connect(db) as c:
            runs.append(c.execute("SELECT pid, ppid, rank, argv FROM run").fetchone())
    workers = [r for r in runs if "compile_worker" in r[3]]
    assert len(workers) >= 2 and len(dbs) >= 6, runs  # a worker pool and a child per rank, at least
    text = tpaudit("report", out).stdout
    helpers = len(dbs) - 2
    assert text.startswith(f"tpaudit report: 2 ranks (and {helpers} helper processes), 4 errors"), text[:300]
    assert text.count("helper processes (no model or optimizer)") == 2
    stale = [l for l in text.splitlines() if l.startswith("  error") and "stale_param" in l]
    assert len(stale) == 1 and "ranks 0-1" in stale[0], text
    assert tpaudit("gate", out).returncode == 1
    html = tpaudit("report", "--format", "html", out).stdout
    assert f"2 ranks (and {helpers} helper processes)" in html
    clean = rank_helpers_run(tmp_path, "clean")
    text = tpaudit("report", clean).stdout
    assert text.startswith("tpaudit report: 2 ranks (and ") and ", 0 errors, 0 warnings" in text, text[:300]
    assert tpaudit("gate", clean).returncode == 0
