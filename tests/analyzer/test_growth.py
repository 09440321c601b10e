"""memory_growth and the memory ledger on fixed databases (growth_db.py:
schema version 2 built with sqlite3 from the seed bug's script): the rule
fires on steady growth and on nothing else (each twin asserts an audit
happened and the ledger adds up), at every audit prefix the rule is judged
as the run stood then, the reports, the gate's --max-growth, diff, and a
version-1 database still reads without a ledger.
Needs TPAUDIT_BUILD (the build tree) in the environment."""
import json
import os
import sqlite3
import subprocess
from pathlib import Path

import pytest

import growth_db as g

BUILD = Path(os.environ["TPAUDIT_BUILD"])
SCHEMA = json.loads((Path(__file__).resolve().parents[2] / "docs" / "report.schema.json").read_text())
TPAUDIT = str(BUILD / "bin" / "tpaudit")
MIB = g.MIB
RATE = 196 * MIB
WARMUP = [(1, 0), (2, 0), (3, 0)]
LEAK = WARMUP + [(s, g.leak(s)) for s in (16, 20, 24, 32)] + [(-1, g.leak(60))]


def tpaudit(*args):
    return subprocess.run([TPAUDIT, *map(str, args)], capture_output=True, text=True)


def report(path):
    """The JSON report of path, checked against the report's JSON Schema."""
    import jsonschema
    r = tpaudit("report", "--format", "json", path)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    jsonschema.Draft202012Validator(SCHEMA).validate(doc)
    return doc


def growth(doc):
    return [f for f in doc["findings"] if f["kind"] == "memory_growth"]


def assert_ledger_adds_up(run):
    assert run["ledger"] and run["ledger_total"] > 0, run
    assert sum(row["bytes"] for row in run["ledger"]) == run["ledger_total"], run["ledger"]


def test_steady_growth_is_found_with_its_holder_rate_and_line(tmp_path):
    doc = report(g.build(tmp_path / "leak.db", LEAK))
    (f,) = growth(doc)
    assert f["severity"] == "error" and f["rank"] == 0 and f["step"] == -1
    assert f["holder"] == {"kind": "object", "class": None, "path": "__main__.kept"}
    assert f["tensor"]["name"] == "kept"
    assert f["growth"]["bytes_per_step"] == RATE and f["growth"]["since_step"] == 16
    assert f["bytes"] == g.leak(60) and f["retained_bytes"] == 0
    assert f["growth"]["created_at"] == "train.py:18 in main"
    assert f["growth"]["example"] == "[4,256,50257] float32 cuda:0, with grad_fn"
    assert f["message"] == ("`kept` (train.py:18) keeps a [4,256,50257] float32 tensor with its graph every step: "
                            "196.0 MiB/step")
    assert_ledger_adds_up(doc["runs"][0])
    held = [row for row in doc["runs"][0]["ledger"] if row["owner_kind"] == "held"]
    assert held == [{"device": "cuda:0", "owner_kind": "held", "owner": "__main__.kept", "bytes": g.leak(60),
                     "tensors": 58, "example": "[4,256,50257] float32 cuda:0, with grad_fn"}]
    assert doc["totals"]["by_kind"] == {"memory_growth": 1}


def test_every_audit_is_judged_as_the_run_stood_then(tmp_path):
    """The rule at each audit of the leak, judged on the database as it was
    when that audit closed: nothing in warm-up or before three steady audits
    rose, growth from the third on."""
    for n in range(1, len(LEAK) + 1):
        doc = report(g.build(tmp_path / f"leak-{n}.db", LEAK[:n]))
        assert doc["runs"][0]["audits"] == n
        steady = [s for s, _ in LEAK[:n] if s > 3 or s < 0]
        assert len(growth(doc)) == (1 if len(steady) >= 3 else 0), (n, doc["findings"])


TWINS = {
    # optimizer state, cache and workspaces: growth before step 4 only
    "warmup": [(1, 10 * MIB), (2, 20 * MIB), (3, 30 * MIB), (16, 30 * MIB), (20, 30 * MIB), (24, 30 * MIB)],
    # a full deque(maxlen=...): flat
    "deque": WARMUP + [(16, 8 * RATE), (20, 8 * RATE), (24, 8 * RATE), (32, 8 * RATE)],
    # a cache cleared every 8 steps: rises, then falls at the audit after a clear
    "cleared": WARMUP + [(16, 0), (20, 4 * RATE), (24, 0), (28, 4 * RATE), (32, 0)],
    # a first eval or an EMA copy made late: one rise, then flat
    "one_time": WARMUP + [(16, 0), (20, 2 * RATE), (24, 2 * RATE), (32, 2 * RATE)],
    # grew over three audits, then later steps of the loop show it bounded: flat, or shrunk
    "grew_then_flat": WARMUP + [(16, 2 * RATE), (20, 4 * RATE), (24, 6 * RATE), (28, 6 * RATE), (32, 6 * RATE)],
    "grew_then_shrank": WARMUP + [(16, 2 * RATE), (20, 4 * RATE), (24, 6 * RATE), (28, 7 * RATE), (32, 3 * RATE)],
    # grew over three audits, then emptied while the loop stepped on (a cache cleared late)
    "grew_then_cleared": WARMUP + [(16, 2 * RATE), (20, 4 * RATE), (24, 6 * RATE), (28, 0), (32, 0)],
    # predictions kept on the CPU: a few hundred bytes a step
    "argmax": WARMUP + [(s, 512 * s) for s in (16, 20, 24, 32)],
}


@pytest.mark.parametrize("case", sorted(TWINS))
def test_bounded_growth_twin_reports_nothing(tmp_path, case):
    doc = report(g.build(tmp_path / f"{case}.db", TWINS[case]))
    assert doc["findings"] == [], doc["findings"]
    run = doc["runs"][0]
    assert run["audits"] == len(TWINS[case]) and not run["inconclusive"]
    assert_ledger_adds_up(run)
    assert tpaudit("gate", tmp_path / f"{case}.db").returncode == 0


def test_growth_stands_when_its_holder_is_freed_after(tmp_path):
    """A holder that grew and then held nothing at the exit audit, after which
    no step came (freed as its function returned, or kept only by an
    exception's traceback) still grew: the finding stands in the verdict and
    the gate, its rate from the rising audits."""
    after = [(-1, 0)]
    path = g.build(tmp_path / "freed.db", WARMUP + [(16, 2 * RATE), (20, 4 * RATE), (24, 6 * RATE)] + after)
    doc = report(path)
    (f,) = growth(doc)
    assert f["tensor"]["name"] == "kept" and f["severity"] == "error"
    assert f["growth"]["bytes_per_step"] == RATE // 2 and f["growth"]["since_step"] == 16
    assert f["created_at"][0]["line"] == 18
    assert doc["runs"][0]["audits"] == 3 + 3 + len(after)
    assert tpaudit("gate", path).returncode == 1


def test_verdicts_name_the_growth_and_stale_tensors_beside_it(tmp_path):
    leak = g.build(tmp_path / "leak.db", LEAK)
    text = tpaudit("report", leak).stdout
    assert "verdict: MEMORY GROWTH: `kept` +196.0 MiB/step\n" in text
    assert "memory ledger at exit: " in text and "__main__.kept" in text
    html = tpaudit("report", "--format", "html", leak).stdout
    assert "<h1>MEMORY GROWTH: `kept` +196.0 MiB/step</h1>" in html.replace("&#96;", "`")
    assert "Memory ledger at exit" in html
    both = g.build(tmp_path / "both.db", LEAK, stale=True)
    text = tpaudit("report", both).stdout
    assert "verdict: STALE TENSORS - optimizers hold tensors the model replaced; MEMORY GROWTH: `kept`" in text
    kinds = report(both)["totals"]["by_kind"]
    assert kinds["memory_growth"] == 1 and kinds["stale_param"] == 1


def test_gate_fails_on_growth_and_max_growth_judges_the_rate(tmp_path):
    leak = g.build(tmp_path / "leak.db", LEAK)
    r = tpaudit("gate", leak)
    assert r.returncode == 1 and "FAIL max-findings (errors)" in r.stdout, r.stdout
    r = tpaudit("gate", "--max-growth", "200MiB", leak)
    assert r.returncode == 0, r.stdout
    assert "ok   max-growth on rank 0: measured 196.0 MiB/step, limit 200.0 MiB/step" in r.stdout
    r = tpaudit("gate", "--max-growth", "100mib", leak)
    assert r.returncode == 1 and "FAIL max-growth on rank 0" in r.stdout, r.stdout
    r = tpaudit("gate", "--max-growth", "1GiB", "--max-findings", "0", leak)
    assert r.returncode == 0, r.stdout  # growth is judged by --max-growth alone
    flat = g.build(tmp_path / "flat.db", TWINS["deque"])
    assert tpaudit("gate", "--max-growth", "0", flat).returncode == 0
    for bad in ("12parsecs", "-1MiB", "", "nan", "1e99GiB"):
        r = tpaudit("gate", "--max-growth", bad, leak)
        lines = r.stderr.splitlines()
        assert r.returncode == 2 and len(lines) == 1 and lines[0].startswith("tpaudit: "), (bad, r.stderr)
        assert "--max-growth" in lines[0] and not r.stdout
    r = tpaudit("gate", "--max-growth", leak)  # SIZE missing: the path taken as SIZE, no PATH left
    assert r.returncode == 2 and len(r.stderr.splitlines()) == 1


def test_diff_and_baseline_see_growth_that_appeared_or_sped_up(tmp_path):
    flat = g.build(tmp_path / "flat.db", TWINS["deque"])
    leak = g.build(tmp_path / "leak.db", LEAK)
    r = tpaudit("diff", flat, leak)
    assert r.returncode == 1, r.stdout
    assert r.stdout.split() == ["appeared", "rank", "0", "memory_growth", "kept", "+196.0", "MiB/step"]
    base = tmp_path / "base.json"
    base.write_text(tpaudit("report", "--format", "json", leak).stdout)
    assert tpaudit("diff", base, leak).stdout == "no changes\n"
    assert tpaudit("gate", "--baseline", base, leak).returncode == 0
    faster = g.build(tmp_path / "faster.db", [(s, 2 * b) for s, b in LEAK])
    r = tpaudit("diff", base, faster)
    assert r.returncode == 1 and r.stdout.startswith("grew") and "+196.0 MiB/step -> +392.0 MiB/step" in r.stdout
    assert tpaudit("gate", "--baseline", base, faster).returncode == 1
    r = tpaudit("diff", leak, flat)
    assert r.returncode == 0 and r.stdout.startswith("disappeared")


def test_library_rows_from_cupti_and_the_unattributed_rest(tmp_path):
    """Where CUPTI recorded allocations, the measured total is CUPTI's live
    device bytes: other libraries get rows, PyTorch's allocator does not
    (the probe's rows cover it), and the rest is unattributed."""
    db = g.build(tmp_path / "gpu.db", LEAK)
    torch_bytes = g.PARAMS * 3 + g.leak(60) + 8 * MIB
    with sqlite3.connect(db) as c:
        for i, (path, low) in enumerate([("/venv/torch/lib/libc10_cuda.so", 0x10000),
                                         ("/venv/nvidia/nccl/lib/libnccl.so.2", 0x20000)], start=1):
            c.execute("INSERT INTO module VALUES(?,?,?,?,?,NULL,0,NULL)", (i, path, low, low, low + 0x1000))
            c.execute("INSERT INTO stack VALUES(?,?,1,?)", (i, i, (low + 0x10).to_bytes(8, "little")))
        c.execute("INSERT INTO alloc VALUES(1,900,'alloc',4096,?,'device',0,1,7,0,'cupti',55,NULL,1)", (torch_bytes,))
        c.execute("INSERT INTO alloc VALUES(2,901,'alloc',?,?,'device',0,1,7,0,'cupti',56,NULL,2)",
                  (1 << 40, 64 * MIB))
        c.execute("INSERT INTO alloc VALUES(3,902,'alloc',?,?,'device',0,1,7,0,'cupti',57,NULL,NULL)",
                  (1 << 41, 2 * MIB))
    run = report(db)["runs"][0]
    rows = {(row["owner_kind"], row["owner"]): row["bytes"] for row in run["ledger"]}
    assert rows[("library", "libnccl.so.2")] == 64 * MIB
    assert not any(kind == "library" and "c10" in owner for kind, owner in rows)
    assert run["ledger_total"] == torch_bytes + 64 * MIB + 2 * MIB
    assert rows[("unattributed", None)] == 8 * MIB + 2 * MIB
    assert_ledger_adds_up(run)


def test_a_version_1_database_reads_without_a_ledger(tmp_path):
    """The seed bug's script is a version-1 file: it reads as before, with no
    ledger and no growth judged, and no error."""
    db = tmp_path / "v1.db"
    with sqlite3.connect(db) as c:
        c.executescript(g.SEED.replace("RANK_ID", "0"))
        assert c.execute("PRAGMA user_version").fetchone() == (1,)
    doc = report(db)
    assert doc["runs"][0]["ledger"] is None and doc["runs"][0]["ledger_total"] is None
    assert not growth(doc) and doc["totals"]["by_kind"]["stale_param"] == 1
    r = tpaudit("report", db)
    assert r.returncode == 0 and not r.stderr and "memory ledger" not in r.stdout
    assert tpaudit("gate", "--max-growth", "0", db).returncode == 0
    assert tpaudit("report", "--format", "html", db).returncode == 0


def run_host(tmp_path, *options):
    env = {k: v for k, v in os.environ.items() if k not in ("TPAUDIT_OUT", "TPAUDIT_FAIL_FAST", "LD_PRELOAD")}
    out = tmp_path / ("out" + "".join(options))
    r = subprocess.run([TPAUDIT, "run", *options, "-o", str(out), "--", str(BUILD / "bin" / "growth_host")],
                       capture_output=True, text=True, env=env, timeout=120)
    return out, r


def test_the_shims_verdict_judges_growth_at_every_audit_and_fail_fast_stops_there(tmp_path):
    """The shim judges each audit in-process with the same rule, on the
    writer's connection: no error until the third steady audit that rose
    (step 24), then memory_growth; --fail-fast stops the run there."""
    out, r = run_host(tmp_path)
    assert r.returncode == 0, r.stderr
    seen = [line.split(":", 1)[0] for line in r.stdout.splitlines()]
    assert seen == [f"step {s}" for s in (1, 2, 3, 16, 20, 24, 28)], r.stdout
    for line in r.stdout.splitlines():
        step = int(line.split()[1].rstrip(":"))
        if step < 24:
            assert " errors 0 stop 0: " in line, line
        else:
            assert " errors 1 stop 0: memory_growth\terror\tkept\t" in line, line
            assert line.endswith("`kept` (train.py:18) keeps a [4,256,50257] float32 tensor with its graph every "
                                 "step: 196.0 MiB/step"), line
    lines = [line for line in r.stderr.splitlines() if line.startswith("tpaudit:")]
    assert lines[0] == ("tpaudit: at step 24: memory_growth: `kept` (train.py:18) keeps a [4,256,50257] float32 "
                        "tensor with its graph every step: 196.0 MiB/step"), lines
    assert lines[1] == "tpaudit: verdict: MEMORY GROWTH: `kept` +196.0 MiB/step (1 process)", lines
    (f,) = growth(report(out))
    assert f["step"] == 28 and f["growth"]["bytes_per_step"] == RATE

    out, r = run_host(tmp_path, "--fail-fast")
    assert r.returncode == 4, r.stderr
    assert r.stdout.splitlines()[-1].startswith("step 24: errors 1 stop 1: memory_growth"), r.stdout
    lines = [line for line in r.stderr.splitlines() if line.startswith("tpaudit:")]
    assert lines[0].endswith("; stopping the run (fail-fast, exit status 4)"), lines
    assert lines[1] == "tpaudit: verdict: MEMORY GROWTH: `kept` +196.0 MiB/step (1 process)", lines
    doc = report(out)
    assert doc["runs"][0]["complete"] and doc["runs"][0]["audits"] == 6
    assert growth(doc)[0]["step"] == 24


def with_library_allocations(db, per_step, steps=range(1, 61), path="/venv/nvidia/nccl/lib/libnccl.so.2"):
    """CUPTI's records of a library that allocates per_step(step) bytes of
    device memory before each step (a stack whose one frame is in it)."""
    with sqlite3.connect(db) as c:
        c.execute("INSERT INTO module VALUES(1,?,?,?,?,NULL,0,NULL)", (path, 0x20000, 0x20000, 0x21000))
        c.execute("INSERT INTO stack VALUES(1,1,1,?)", ((0x20010).to_bytes(8, "little"),))
        for step in steps:
            if per_step(step):
                c.execute("INSERT INTO alloc VALUES(?,?,'alloc',?,?,'device',0,1,7,0,'cupti',?,NULL,1)",
                          (100 + step, 10_000 * step - 10, (1 << 40) + step * (1 << 30), per_step(step), 1000 + step))
    return db


def test_a_library_that_keeps_growing_is_found_and_its_warm_up_workspace_is_not(tmp_path):
    quiet = WARMUP + [(s, 0) for s in (16, 20, 24, 32)] + [(-1, 0)]
    grows = with_library_allocations(g.build(tmp_path / "nccl.db", quiet), lambda step: 32 * MIB)
    (f,) = growth(report(grows))
    assert f["holder"]["kind"] == "library" and f["holder"]["path"] == f["tensor"]["name"] == "libnccl.so.2"
    assert f["growth"]["bytes_per_step"] == 32 * MIB and f["bytes"] == 60 * 32 * MIB
    assert f["message"] == "`libnccl.so.2` keeps device memory every step: 32.0 MiB/step"
    assert "verdict: MEMORY GROWTH: `libnccl.so.2` +32.0 MiB/step" in tpaudit("report", grows).stdout
    assert tpaudit("gate", grows).returncode == 1
    # a workspace made in warm-up (steps 1-3) and kept: flat after it
    once = with_library_allocations(g.build(tmp_path / "once.db", quiet), lambda step: 256 * MIB if step <= 3 else 0)
    doc = report(once)
    assert doc["findings"] == [] and doc["runs"][0]["audits"] == len(quiet)
    assert tpaudit("gate", once).returncode == 0


def test_a_holder_first_seen_late_is_judged_from_then(tmp_path):
    """Absent at the first steady audit (named otherwise, or made later), then
    growing: its rate comes from the audits that saw it, not from nothing."""
    late = WARMUP + [(16, 0)] + [(s, g.leak(s)) for s in (20, 24, 32)]
    (f,) = growth(report(g.build(tmp_path / "late.db", late)))
    assert f["growth"]["bytes_per_step"] == RATE and f["growth"]["since_step"] == 20
    two = WARMUP + [(16, 0), (20, 0)] + [(s, g.leak(s)) for s in (24, 32)]
    assert growth(report(g.build(tmp_path / "two.db", two))) == []  # seen at two audits only
