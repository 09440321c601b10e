"""`tpaudit report --format memory-viz`: PyTorch's memory snapshot of a run
with CUPTI's device allocations (memviz_db.py, and any GPU-recorded fixture
under fixtures/gpu/), loaded with torch.cuda._memory_viz (segments, memory,
trace_plot, segsum, trace) and checked as MemoryViz.js reads it: protocol,
opcodes, block tiling, every block inside a live segment at every entry,
the owner categories with "unknown" among them, what user_metadata says.
Bad input: no device records, a rank filter matching nothing, a version-1
database, several runs to stdout; nothing written on an error.
Needs TPAUDIT_BUILD (the build tree) in the environment."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "html"))
import growth_db  # noqa: E402
import memviz_db  # noqa: E402
from memviz_checks import load_checked  # noqa: E402

BUILD = Path(os.environ["TPAUDIT_BUILD"])
TPAUDIT = str(BUILD / "bin" / "tpaudit")
MIB = 1 << 20
GPU_FIXTURES = sorted((HERE / "fixtures" / "gpu").glob("*.db"))
OWNER_KINDS = {"parameter", "gradient", "optimizer_state", "stale", "held", "autograd", "allocator_cache",
               "unattributed", "unknown"}


def tpaudit(*args):
    return subprocess.run([TPAUDIT, *map(str, args)], capture_output=True, text=True)


def export(out, *paths, extra=()):
    r = tpaudit("report", "--format", "memory-viz", "-o", out, *extra, *paths)
    assert r.returncode == 0, r.stderr
    return r


@pytest.fixture(scope="module")
def leak(tmp_path_factory):
    d = tmp_path_factory.mktemp("leak")
    memviz_db.main.__globals__["sys"].argv = ["memviz_db.py", str(d), "12", "2"]
    memviz_db.main()
    return d


def test_two_ranks_two_files_with_owners(leak, tmp_path):
    export(tmp_path / "snap.pickle", leak)
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == ["snap.rank0.pickle", "snap.rank1.pickle"]
    snap = load_checked(tmp_path / "snap.rank0.pickle")
    trace = snap["device_traces"][0]
    cats = {e.get("category") for e in trace}
    assert {"parameter", "optimizer_state", "stale", "held", "allocator_cache", "unknown", "libcublas.so.13"} <= cats
    # the held band grows step over step: one new block per audited step of the leak
    held = [e for e in trace if e["action"] == "alloc" and e.get("category") == "held"]
    assert len(held) >= 10 and all("__main__.kept" in e["user_metadata"] for e in held)
    assert sum(b["size"] for s in snap["segments"] for b in s["blocks"] if b["state"] == "active_allocated"
               and any(e["addr"] == b["address"] and e.get("category") == "held" for e in held)) == growth_db.leak(12)
    stale = [e for e in trace if e["action"] == "alloc" and e.get("category") == "stale"]
    assert stale and "finding stale_param tensor transformer.wte.weight" in stale[0]["user_metadata"]
    assert stale[0]["frames"], "the stale tensor's replacement stack"
    # audits at their times, the OOM as the viewer's oom entry
    audits = [e for e in trace if e["action"] == "snapshot" and "tpaudit audit" in e.get("user_metadata", "")]
    assert len(audits) == 13  # steps 1-12 and exit
    oom = [e for e in trace if e["action"] == "oom"]
    # as PyTorch's own snapshot has it: the size asked and the device's free bytes, which the
    # viewer prints ("OOM (requested 2.0GiB, CUDA has 1.2GiB memory free)"), and tpaudit's cause
    assert len(oom) == 1 and (oom[0]["size"], oom[0]["device_free"]) == (memviz_db.OOM_ASKED, memviz_db.OOM_FREE)
    doc = json.loads(tpaudit("report", "--format", "json", leak).stdout)
    (finding,) = [f for f in doc["findings"] if f["rank"] == 0 and f["kind"].endswith("out_of_memory")]
    assert oom[0]["user_metadata"] == finding["message"] and "at step 12 (rank 0): asked 2.0 GiB, 1.2 GiB free" in \
        finding["message"]
    times = [e["time_us"] for e in trace]
    assert times == sorted(times)
    # a library's allocation is its own segment and block, with its native stack
    cublas = [s for s in snap["segments"] if s.get("category") == "libcublas.so.13"]
    assert len(cublas) == 1 and cublas[0]["blocks"][0]["state"] == "active_allocated"
    assert "libcublas.so.13+0x" in cublas[0]["frames"][0]["name"]
    assert snap["tpaudit"]["rank"] == 0 and snap["tpaudit"]["unplaced_bytes"] == 0


def test_no_growth_twin_has_no_held_band(tmp_path):
    db = tmp_path / "db"
    db.mkdir()
    memviz_db.build(str(db / "tpaudit-node0-1.db"), 6)
    import sqlite3  # the same run without the leak: no audit has held bytes
    with sqlite3.connect(db / "tpaudit-node0-1.db") as c:
        c.execute("DELETE FROM ledger WHERE owner_kind='held'")
        assert c.execute("SELECT count(*) FROM audit").fetchone()[0] == 8
    export(tmp_path / "one.pickle", db)
    snap = load_checked(tmp_path / "one.pickle")
    cats = {e.get("category") for e in snap["device_traces"][0]}
    assert "held" not in cats and {"parameter", "optimizer_state"} <= cats
    assert len([e for e in snap["device_traces"][0] if e["action"] == "snapshot"]) >= 7


def test_steps_and_max_events_keep_files_small(leak, tmp_path):
    export(tmp_path / "all.pickle", leak, extra=("--rank", "0"))
    export(tmp_path / "some.pickle", leak, extra=("--rank", "0", "--steps", "5:8"))
    export(tmp_path / "few.pickle", leak, extra=("--rank", "0", "--max-events", "20"))
    full, some, few = (load_checked(tmp_path / n) for n in ("all.pickle", "some.pickle", "few.pickle"))
    steps = lambda s: {e["user_metadata"].split(" at ")[1].split(":")[0] for e in s["device_traces"][0]  # noqa: E731
                       if e["action"] == "snapshot" and "tpaudit audit" in e.get("user_metadata", "")}
    assert steps(some) == {"step 5", "step 6", "step 7", "step 8"}
    assert len(some["device_traces"][0]) < len(full["device_traces"][0])
    assert len(few["device_traces"][0]) <= 21 and few["tpaudit"]["entries_left_out"] > 0
    assert (tmp_path / "few.pickle").stat().st_size < (tmp_path / "all.pickle").stat().st_size


def test_no_device_records_is_an_error_and_writes_nothing(tmp_path):
    db = tmp_path / "cpu"
    db.mkdir()
    growth_db.build(str(db / "tpaudit-node0-1.db"), [(1, 0), (2, 0)])  # CUPTI off: no alloc rows
    out = tmp_path / "keep.pickle"
    out.write_bytes(b"before")
    r = tpaudit("report", "--format", "memory-viz", "-o", out, db)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and r.stderr.startswith("tpaudit: ")
    assert "no device allocations" in r.stderr
    assert out.read_bytes() == b"before" and sorted(p.name for p in tmp_path.iterdir()) == ["cpu", "keep.pickle"]


def test_rank_matching_nothing_is_an_error(leak, tmp_path):
    r = tpaudit("report", "--format", "memory-viz", "-o", tmp_path / "x.pickle", "--rank", "7", leak)
    assert r.returncode == 2 and r.stderr.startswith("tpaudit: ") and "no run of rank 7" in r.stderr
    assert not list(tmp_path.iterdir())


def test_bad_options(leak, tmp_path):
    for args in (("--format", "json", "--rank", "0"), ("--format", "memory-viz", "--steps", "9:3"),
                 ("--format", "memory-viz", "--max-events", "-1"), ("--format", "memory-viz")):
        r = tpaudit("report", *args, leak)
        assert r.returncode == 2 and r.stderr.count("\n") == 1 and r.stderr.startswith("tpaudit: "), (args, r.stderr)
    assert not list(tmp_path.iterdir())


def test_version_1_database_exports_segments_without_owners(tmp_path):
    import cupti_fixture
    db = tmp_path / "v1"
    cupti_fixture.main.__globals__["sys"].argv = ["cupti_fixture.py", str(db)]
    cupti_fixture.main()
    out = tmp_path / "v1.pickle"
    r = export(out, db)
    assert r.stderr.count("version-1 database") == 2 and r.stderr.startswith("tpaudit: note: ")
    for rank in (0, 1):
        snap = load_checked(tmp_path / f"v1.rank{rank}.pickle")
        trace = snap["device_traces"][0]
        assert snap["segments"] and not [e for e in trace if e.get("category") in OWNER_KINDS - {"unknown"}]
        assert len([e for e in trace if e["action"] == "snapshot" and "(no ledger)" in e.get("user_metadata", "")]) == 3


@pytest.mark.skipif(not GPU_FIXTURES, reason="no GPU-recorded fixture committed under tests/analyzer/fixtures/gpu/")
@pytest.mark.parametrize("db", GPU_FIXTURES, ids=lambda p: p.name)
def test_gpu_recorded_fixture(db, tmp_path):
    export(tmp_path / "gpu.pickle", db)
    for f in tmp_path.iterdir():
        snap = load_checked(f)
        cats = {e.get("category") for t in snap["device_traces"] for e in t}
        assert cats & {"parameter", "optimizer_state"} and "unknown" in cats
