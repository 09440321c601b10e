"""`tpaudit report --format memory-viz`: PyTorch's memory snapshot of a run
with CUPTI's device allocations (memviz_db.py, and any GPU-recorded fixture
under fixtures/gpu/, among them seed-peak.db with its phase marks), loaded
with torch.cuda._memory_viz (segments, memory, trace_plot, segsum, trace)
and checked as MemoryViz.js reads it: protocol, opcodes, block tiling,
every block inside a live segment at every entry,
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


PHASE_MARK = ("CREATE TABLE phase_mark(step INTEGER NOT NULL, ts_ns INTEGER NOT NULL, device TEXT NOT NULL,"
              " phase TEXT NOT NULL, owner TEXT, live_bytes INTEGER NOT NULL, reserved_bytes INTEGER, peak_bytes INTEGER)")


def with_phase_marks(path, peak_column=True):
    """Step 2 of memviz_db's run, between the audits of steps 1 and 2, in
    four parts: its forward makes 300 MiB, backward frees 200 MiB of them,
    the optimizer step makes 64 MiB (the probe's phase marks, _phases.py);
    peak_column False: the table as the first marks wrote it, without
    peak_bytes."""
    import sqlite3
    c = sqlite3.connect(path)
    attributed = c.execute("SELECT sum(bytes) FROM ledger WHERE audit_id=1 AND owner_kind NOT IN"
                           " ('measured', 'allocator_cache')").fetchone()[0]
    before = c.execute("SELECT live_bytes, reserved_bytes FROM sample WHERE step=1").fetchone()
    c.execute(PHASE_MARK if peak_column else PHASE_MARK.replace(", peak_bytes INTEGER", ""))
    for ts, phase, owner, made in ((12_000, "forward", "GPT2LMHeadModel", 0), (14_000, "backward", "GPT2LMHeadModel", 300),
                                   (16_000, "optimizer_step", "AdamW", 100), (18_000, "outside", None, 164)):
        c.execute("INSERT INTO phase_mark VALUES(2,?,'cuda:0',?,?,?,?%s)" % (",NULL" if peak_column else ""),
                  (ts, phase, owner, before[0] + made * MIB, before[1]))
    c.commit()
    c.close()
    return before[0] - attributed  # what no audit attributed before the marks


def test_phase_marks_name_what_a_step_made_between_audits(tmp_path):
    """A run with phase marks (tpaudit run --peak): what step 2 made between
    its audits is the forward's of GPT2LMHeadModel and the optimizer step's
    of AdamW, not "unknown"; backward's frees come off the newest bytes
    first.  Its twin without marks has only "unknown" there."""
    for name in ("marks", "twin"):
        memviz_db.build(str(tmp_path / f"{name}.db"), 4, 0)
    unknown_before = with_phase_marks(str(tmp_path / "marks.db"))
    snaps = {}
    for name in ("marks", "twin"):
        export(tmp_path / f"{name}.pickle", tmp_path / f"{name}.db")
        snaps[name] = load_checked(tmp_path / f"{name}.pickle")
    trace = snaps["marks"]["device_traces"][0]
    made = {}
    for e in trace:
        if e.get("category") in ("forward", "backward", "optimizer_step", "outside") and e["action"] in (
                "alloc", "free_completed"):
            made.setdefault(e["category"], []).append((e["action"], e["size"], e.get("user_metadata", "")))
    # after the last mark the part running is "outside" (until a next forward): what the later
    # samples find beyond their audits is its
    assert set(made) == {"forward", "optimizer_step", "outside"}, made.keys()
    forward = made["forward"]
    assert all("forward of GPT2LMHeadModel: made in the forward part of step 2 (phase mark)" in m
               for a, _, m in forward if a == "alloc")
    grown = sum(s for a, s, _ in forward if a == "alloc")
    freed = sum(s for a, s, _ in forward if a == "free_completed")
    # 300 MiB made, 200 MiB freed by backward, the last 100 MiB freed when the audit of step 2 attributes all
    assert (grown - freed) == 0 and grown >= 300 * MIB and freed >= 300 * MIB
    assert sum(s for a, s, _ in made["optimizer_step"] if a == "alloc") == 64 * MIB
    assert "optimizer_step of AdamW" in made["optimizer_step"][0][2]
    meta = snaps["marks"]["tpaudit"]
    assert meta["phase_bytes"] == 300 * MIB
    # what was unattributed before the first mark stays "unknown": no mark says which part made it
    assert 0 < meta["unknown_bytes"] == unknown_before <= snaps["twin"]["tpaudit"]["unknown_bytes"]
    twin = snaps["twin"]
    assert twin["tpaudit"]["phase_bytes"] == 0
    assert not {e.get("category") for e in twin["device_traces"][0]} & {"forward", "backward", "optimizer_step", "outside"}
    # the HTML owner timeline names the parts too
    html = tpaudit("report", "--format", "html", tmp_path / "marks.db").stdout
    assert "made in forward (between audits)" in html and "made in the optimizer step (between audits)" in html
    assert "made in forward" not in tpaudit("report", "--format", "html", tmp_path / "twin.db").stdout
    # marks written before they read the peak: the same parts, no device peak
    memviz_db.build(str(tmp_path / "first.db"), 4, 0)
    with_phase_marks(str(tmp_path / "first.db"), peak_column=False)
    export(tmp_path / "first.pickle", tmp_path / "first.db")
    assert load_checked(tmp_path / "first.pickle")["tpaudit"]["phase_bytes"] == 300 * MIB
    doc = json.loads(tpaudit("report", "--format", "json", tmp_path / "first.db").stdout)
    assert all(run["peak"] is None or run["peak"]["device_peak"] is None for run in doc["runs"])


def test_submodule_marks_name_what_each_module_made(tmp_path):
    """The forward of steps 1 to 3 is marked module by module (_phases.py):
    what is made from one submodule's call to the next is that submodule's,
    in the memory viewer's export and in the HTML owner timeline's hover
    text; backward frees the newest first (the last module's)."""
    path = str(tmp_path / "modules.db")
    memviz_db.build(path, 4, 0)
    import sqlite3
    c = sqlite3.connect(path)
    before = c.execute("SELECT live_bytes, reserved_bytes FROM sample WHERE step=1").fetchone()
    c.execute(PHASE_MARK)
    for ts, phase, owner, made in ((12_000, "forward", "GPT2LMHeadModel", 0), (12_500, "forward", "transformer.h.0", 0),
                                   (13_000, "forward", "transformer.h.1", 120), (13_500, "forward", "lm_head", 200),
                                   (14_000, "backward", "GPT2LMHeadModel", 300), (16_000, "optimizer_step", "AdamW", 100)):
        c.execute("INSERT INTO phase_mark VALUES(2,?,'cuda:0',?,?,?,?,NULL)", (ts, phase, owner, before[0] + made * MIB, before[1]))
    c.commit()
    c.close()
    export(tmp_path / "modules.pickle", path)
    trace = load_checked(tmp_path / "modules.pickle")["device_traces"][0]
    owner_at, live, made = {}, {}, {}  # block address -> owner; owner -> live bytes, most live
    for e in trace:
        if e["action"] == "alloc" and e.get("category") == "forward":
            owner_at[e["addr"]] = owner = e["user_metadata"].split(":")[0]
            live[owner] = live.get(owner, 0) + e["size"]
            made[owner] = max(made.get(owner, 0), live[owner])
        elif e["action"] == "free_completed" and e["addr"] in owner_at:
            owner = owner_at.pop(e["addr"])
            live[owner] -= e["size"]
    assert {k: v // MIB for k, v in made.items()} == {
        "forward of transformer.h.0": 120, "forward of transformer.h.1": 80, "forward of lm_head": 100}, made
    # what backward gave back before the optimizer step's mark (200 MiB) came off lm_head's and h.1's first
    assert "forward of GPT2LMHeadModel" not in made
    html = tpaudit("report", "--format", "html", path).stdout
    assert ("step 2, phase mark backward of GPT2LMHeadModel; live, not yet attributed by an audit: 120.0 MiB made in "
            "forward of transformer.h.0, 100.0 MiB made in forward of lm_head, 80.0 MiB made in forward of "
            "transformer.h.1") in html, html[html.find("owner-made"):][:600]
    assert ("step 2, phase mark optimizer_step of AdamW; live, not yet attributed by an audit: 100.0 MiB made in "
            "forward of transformer.h.0") in html


# The seed run (examples/finetune.py --order buggy --steps 5 --device cuda) under
# `tpaudit run --peak` on an H100 (torch 2.11, scripts/gpu_memviz.sh with
# TPAUDIT_PEAK=backward, 2026-12-07 at 5a50b0b: the forwards of steps 1-3 marked
# module by module, docs/GPU_RUNS.md): its phase marks read the
# device's peak, so this is what only a GPU makes, checked in every format.
SEED_PEAK = HERE / "fixtures" / "gpu" / "seed-peak.db"


def test_device_made_seed_run_with_phase_marks_in_every_format(tmp_path):
    export(tmp_path / "seed.pickle", SEED_PEAK)
    snap = load_checked(tmp_path / "seed.pickle")
    allocs = [e for t in snap["device_traces"] for e in t if e["action"] == "alloc"]
    cats = {e.get("category") for e in allocs}
    assert {"forward", "backward", "optimizer_step", "stale", "parameter"} <= cats, cats
    unknown = [e for e in allocs if e.get("category") == "unknown"]
    # on the device the same run without marks had 1,247 of 2,515 alloc entries "unknown" (MEMVIZ.md)
    assert len(unknown) == 77 and len(allocs) == 2954, (len(unknown), len(allocs))
    # the activations an audit counted are a group per module that made them
    graphs = {e["user_metadata"].split(";")[0] for e in allocs if e.get("category") == "autograd"}
    assert {"autograd saved for backward in TinyLM", "autograd autograd graph of logits, saved for backward in block",
            "autograd autograd graph of logits, saved for backward in block.self_attn"} <= graphs, graphs
    # the most named between audits: what step 1's forward made up to the mark of ln_f, its last module
    assert (snap["tpaudit"]["unknown_bytes"], snap["tpaudit"]["phase_bytes"]) == (25945088, 61224448 - 25945088)
    forward = {e["user_metadata"].split(":")[0] for e in allocs if e.get("category") == "forward"}
    # steps 1 to 3 are marked module by module: each block part made its own bytes
    assert {"forward of block.self_attn", "forward of block.linear1", "forward of block.dropout",
            "forward of ln_f"} <= forward, forward
    text = tpaudit("report", SEED_PEAK).stdout
    # the audit inside step 2's backward counted 152.1 MiB allocated (its ledger's measured total less the
    # allocator's cache): to the byte what the backward mark read from the allocator just after it
    assert ("device peak 201.2 MiB (max_memory_allocated), reached in the backward of step 2 (TinyLM): 152.1 MiB "
            "allocated at the audit \"backward\" of step 2, 49.1 MiB made after it (gradients and temporaries in "
            "flight)") in text, text
    assert "stale_param          wte.weight" in text
    import jsonschema
    doc = json.loads(tpaudit("report", "--format", "json", SEED_PEAK).stdout)
    jsonschema.Draft202012Validator(json.loads((HERE.parents[1] / "docs" / "report.schema.json").read_text())).validate(doc)
    (run,) = doc["runs"]
    assert run["peak"]["device_peak"] == {"bytes": 211001856, "step": 2, "phase": "backward", "owner": "TinyLM",
                                          "audit": "backward", "audit_step": 2, "audit_bytes": 159536640}
    assert run["peak"]["label"] == "backward" and run["peak"]["modules"][0]["module"] == "TinyLM"
    # the moment of the peak, from the allocator's history the probe replayed in step 2's backward: to the byte the
    # max_memory_allocated the marks read, told by owner (the parts, the cache aside, add up to it)
    moment = run["peak"]["moment"]
    assert moment["step"] == 2 and moment["bytes"] == 211001856, moment
    parts = {(p["kind"], p["owner"]): p["bytes"] for p in moment["parts"]}
    assert sum(b for (kind, _), b in parts.items() if kind != "allocator_cache") == moment["bytes"], parts
    assert parts[("temporary", None)] == 51466752 and parts[("autograd", "saved for backward in TinyLM")] > 0, parts
    assert parts[("gradient", "wte")] == parts[("parameter", "wte")] == 12866560, parts
    # the two cuBLAS workspaces of the forward's and the backward's threads, named as the ledger names them
    assert parts[("library", "cuBLAS workspace (PyTorch)")] == 2 * 32 * 1024 * 1024, parts
    assert ("unattributed", None) not in parts, parts
    assert "at the peak's moment in step 2 (the allocator's history replayed): 201.2 MiB allocated:" in text, text
    html = tpaudit("report", "--format", "html", SEED_PEAK).stdout
    assert "made in forward (between audits)" in html and "made in backward (between audits)" in html
    assert '<table class="libs peak moment"><caption>At the peak' in html
    junit = tpaudit("report", "--format", "junit", SEED_PEAK).stdout
    assert "<testsuite" in junit and "stale_param" in junit
    assert tpaudit("gate", SEED_PEAK).returncode == 1  # the stale embedding
