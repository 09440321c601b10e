"""The analyzer on hostile input: every hostile string and number a database
can hold, JSON-looking fields that are not JSON, FIFOs and devices given as
databases or named as modules, databases written while they are read,
locked, in read-only directories, and outputs that are not regular files.
Every case must end with exit 0/1/2/3, no sanitizer report and no hang
(a 30 s limit per command); outputs must be valid (JSON with valid UTF-8
against docs/report.schema.json, XML, a memory-viz pickle that loads) and
no control byte may reach the terminal.  Needs TPAUDIT_BUILD; TPAUDIT_SANITIZED=ON (the ASan/UBSan build)
runs the 1000-read concurrent case, other builds 100 reads."""
import concurrent.futures
import json
import os
import pickle
import shutil
import sqlite3
import stat
import subprocess
import sys
import tempfile
import threading
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import hostile_db  # noqa: E402

BUILD = Path(os.environ["TPAUDIT_BUILD"])
SRC = Path(__file__).resolve().parents[2]
TPAUDIT = str(BUILD / "bin" / "tpaudit")
SANITIZED = os.environ.get("TPAUDIT_SANITIZED", "").upper() in ("ON", "1", "TRUE", "YES")
LIMIT = 30
SCHEMA = json.loads((SRC / "docs" / "report.schema.json").read_text())
_VALIDATOR = []
SANITIZER_MARKS = ("AddressSanitizer", "runtime error:", "LeakSanitizer", "UndefinedBehaviorSanitizer")


def run(*args, timeout=LIMIT, **kw):
    r = subprocess.run([TPAUDIT, *map(str, args)], capture_output=True, timeout=timeout, **kw)
    err = r.stderr.decode(errors="replace")
    assert r.returncode in (0, 1, 2, 3), (args, r.returncode, err[-3000:])
    assert not any(m in err for m in SANITIZER_MARKS), (args, err[-3000:])
    if r.returncode == 2:
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("tpaudit:"), (args, err)
    return r


def check_terminal(data):
    """No control byte but newline, no ESC, and no injected line."""
    text = data.decode("utf-8")  # valid UTF-8, or this raises
    bad = [ch for ch in text if (ord(ch) < 0x20 and ch != "\n") or 0x7F <= ord(ch) < 0xA0 or ch in "\u202e\u2028\u2029"]
    assert not bad, bad[:5]
    assert not any(line.startswith("INJECTED") for line in text.splitlines())


def check_json(data, findings_checked=50):
    """Strict UTF-8, JSON, and the schema (on the first findings only: the
    Python validator is slow on thousands of frames)."""
    text = data.decode("utf-8")  # strict: invalid UTF-8 raises
    doc = json.loads(text)
    if not _VALIDATOR:
        import jsonschema
        jsonschema.Draft202012Validator.check_schema(SCHEMA)
        _VALIDATOR.append(jsonschema.Draft202012Validator(SCHEMA))
    _VALIDATOR[0].validate(dict(doc, findings=doc["findings"][:findings_checked]))
    return doc


def check_all_outputs(db, old=None):
    r = run("report", "--format", "json", db)
    if r.returncode == 0:
        check_json(r.stdout)
    r = run("report", db)
    check_terminal(r.stdout)
    check_terminal(r.stderr)
    r = run("report", "--format", "junit", db)
    if r.returncode == 0:
        ET.fromstring(r.stdout)
    run("report", "--format", "html", db)
    r = run("report", "--format", "memory-viz", db)
    check_terminal(r.stderr)
    if r.returncode == 0:
        assert isinstance(pickle.loads(r.stdout)["device_traces"], list)
    r = run("gate", db)
    check_terminal(r.stdout)
    check_terminal(r.stderr)
    if old is not None:
        r = run("diff", old, db)
        check_terminal(r.stdout)


def test_every_hostile_field(tmp_path):
    cases = hostile_db.hostile_cases(tmp_path)
    seed = hostile_db.seed(tmp_path / "seed-old.db")
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        list(pool.map(lambda c: check_all_outputs(c[1], seed if c[0].startswith(("tensor", "run.host")) else None), cases))


def test_hostile_strings_are_escaped_not_dropped(tmp_path):
    db = hostile_db.seed(tmp_path / "h.db")
    hostile_db.set_text(db, "tensor", "name")
    text = run("report", db).stdout.decode()
    assert "\\x1b[31mRED" in text and "\\x0aINJECTED" in text
    doc = check_json(run("report", "--format", "json", db).stdout)
    # The name the model's structure gives it comes first (the replacement
    # event's path); the stored name is one of its aliases.
    name = " ".join([doc["findings"][0]["tensor"]["name"]] + doc["findings"][0]["tensor"]["aliases"])
    assert "\x1b[31mRED" in name and "\ufffd" in name and "<script>" in name
    junit = run("report", "--format", "junit", db).stdout
    ET.fromstring(junit)
    assert b"\x1b" not in junit


def test_argv_and_shapes_are_validated_json(tmp_path):
    db = hostile_db.seed(tmp_path / "a.db")
    hostile_db.set_text(db, "run", "argv", b'[}"{]')
    hostile_db.set_text(db, "tensor", "shape", b"[1,,-]")
    doc = check_json(run("report", "--format", "json", db).stdout)
    assert doc["runs"][0]["argv"] == '[}"{]'
    assert doc["findings"][0]["tensor"]["shape"] == "[1,,-]"
    good = hostile_db.seed(tmp_path / "b.db")
    doc = check_json(run("report", "--format", "json", good).stdout)
    assert doc["runs"][0]["argv"] == ["python", "finetune.py"] and doc["findings"][0]["tensor"]["shape"] == [50257, 768]


def test_numbers_are_range_checked(tmp_path):
    db = hostile_db.seed(tmp_path / "cancel.db")
    with sqlite3.connect(db) as c:
        c.execute("INSERT INTO tensor VALUES(1,101,'neg.weight','[1]','[1]','float32','cuda:0',9000000,-154389504,4,1,0,'Parameter')")
        c.execute("INSERT INTO ref VALUES(1,'optimizer','AdamW',7,'param_groups[0].params[2]','group_param',101,0)")
    doc = check_json(run("report", "--format", "json", db).stdout)
    neg = [f for f in doc["findings"] if f["tensor"]["name"] == "neg.weight"]
    assert neg and neg[0]["retained_bytes"] == 0  # clamped, cannot cancel
    assert doc["totals"]["retained_bytes"] == 154389504
    assert run("gate", "--max-retained", "100MiB", db).returncode == 1
    with sqlite3.connect(db) as c:
        c.execute("UPDATE tensor SET storage_bytes=? WHERE key=101", (2 ** 63 - 1,))
    doc = check_json(run("report", "--format", "json", db).stdout)
    assert max(f["retained_bytes"] for f in doc["findings"]) == 2 ** 53
    assert run("gate", "--max-retained", "1TiB", db).returncode == 1


def test_storage_offsets_out_of_range(tmp_path):
    """A file with tensor.storage_offset (the seed predates it) holding a
    negative and the largest offset: the negative one is left out, the other
    is an integer, and every format still renders."""
    db = hostile_db.seed(tmp_path / "offsets.db")
    with sqlite3.connect(db) as c:
        c.execute("ALTER TABLE tensor ADD COLUMN storage_offset INTEGER NOT NULL DEFAULT 0")
        c.execute("INSERT INTO tensor VALUES(1,104,'neg.view','[1]','[1]','float32','cuda:0',9300000,8,4,1,0,'Parameter',-3)")
        c.execute("INSERT INTO tensor VALUES(1,105,'far.view','[1]','[1]','float32','cuda:0',9400000,8,4,1,0,'Parameter',?)",
                  (2 ** 63 - 1,))
        for key in (104, 105):
            c.execute("INSERT INTO ref VALUES(1,'optimizer','AdamW',7,'param_groups[0].params[9]','group_param',?,0)", (key,))
    doc = check_json(run("report", "--format", "json", db).stdout)
    views = {f["tensor"]["name"]: f["tensor"] for f in doc["findings"] if f["tensor"]["name"] in ("neg.view", "far.view")}
    assert "storage_offset" not in views["neg.view"] and views["far.view"]["storage_offset"] == 2 ** 63 - 1
    text = run("report", db).stdout
    check_terminal(text)
    assert b"a view at element offset 9223372036854775807 of a 8 B storage (4 B of its own)" in text
    assert b"a view of a 8 B storage (4 B of its own)" in text  # part of its storage, offset unknown
    assert b"element offset 0 " not in text and b"element offset -" not in text
    assert run("report", "--format", "html", db).returncode == 0


def test_many_audits_are_judged_in_linear_time(tmp_path):
    """Every audit is judged (for the stale bytes of each), and the
    generic-master rule spans all audits: 400 audits of 240 tensors must not
    cost 400 reads of every audit's refs (that took 36 s; now about 1)."""
    db = hostile_db.many_audits(tmp_path / "audits.db", audits=400, params=200, generic=35, stale=5)
    t0 = time.monotonic()
    doc = check_json(run("report", "--format", "json", db, timeout=120).stdout)
    elapsed = time.monotonic() - t0
    assert sorted(f["tensor"]["name"] for f in doc["findings"]) == [f"p{k}" for k in range(236, 241)]
    points = doc["runs"][0]["audit_points"]
    assert len(points) == 400 and points[0]["stale_bytes"] == 0 and all(p["stale_bytes"] == 5 * 256 for p in points[1:])
    assert elapsed < (40 if SANITIZED else 15), f"{elapsed:.1f} s for 400 audits"


@pytest.mark.parametrize("size", ["inf", "nan", "1e30", "-1", "0x10", "infinity", "1e19", "12XB", ""])
def test_gate_refuses_bad_sizes(tmp_path, size):
    db = hostile_db.seed(tmp_path / "s.db")
    r = run("gate", "--max-retained", size, db)
    assert r.returncode == 2 and b"bad SIZE" in r.stderr


def test_gate_sizes_any_case_and_defaults(tmp_path):
    db = hostile_db.seed(tmp_path / "s.db")  # 147.2 MiB retained, 2 error findings
    for size in ("200mib", "200MIB", "200 MiB", "0.2gib", "200m", "300mb"):
        r = run("gate", "--max-retained", size, db)
        assert r.returncode == 0, (size, r.stdout)
        assert b"max-findings" not in r.stdout  # only the rule given is judged
    r = run("gate", "--max-retained", "100MiB", db)
    assert r.returncode == 1 and b"FAIL max-retained" in r.stdout and b"max-findings" not in r.stdout
    r = run("gate", "--max-findings", "2", db)
    assert r.returncode == 0 and b"max-retained" not in r.stdout
    r = run("gate", db)  # neither given: both, limit 0
    assert r.returncode == 1 and b"max-retained" in r.stdout and b"max-findings" in r.stdout


def test_cli_errors_and_output(tmp_path):
    db = hostile_db.seed(tmp_path / "s.db")
    for args in (["report", "--bogus", db], ["report", "-x", db], ["report", "--format"], ["gate", "--max-retained"],
                 ["gate", "--nope", db], ["diff", "--nope", db, db], ["report"], ["gate"], ["diff", db]):
        r = run(*args)
        assert r.returncode == 2 and r.stderr.startswith(b"tpaudit:"), (args, r.stderr)
    out = tmp_path / "r.json"
    assert run("report", "--format", "json", "--output", out, db).returncode == 0
    check_json(out.read_bytes())
    r = run("report", "-o", tmp_path / "missing" / "dir" / "x", db)
    assert r.returncode == 2 and b"No such file or directory" in r.stderr
    r = run("report", "-o", tmp_path, db)
    assert r.returncode == 2 and b"directory" in r.stderr


def test_output_to_devices_fifos_and_links(tmp_path):
    db = hostile_db.seed(tmp_path / "s.db")
    assert run("report", "-o", "/dev/null", db).returncode == 0
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(open(fifo, "rb").read()))
    reader.start()
    assert run("report", "--format", "json", "-o", fifo, db).returncode == 0
    reader.join(LIMIT)
    assert stat.S_ISFIFO(os.stat(fifo).st_mode) and check_json(got[0])
    target = tmp_path / "real.txt"
    target.write_text("old")
    link = tmp_path / "link.txt"
    link.symlink_to(target)
    assert run("report", "-o", link, db).returncode == 0
    assert link.is_symlink() and target.read_text().startswith("tpaudit report")
    assert not list(tmp_path.glob("*.tmp-*"))


def test_fifos_and_devices_as_inputs(tmp_path):
    fifo = tmp_path / "in.db"
    os.mkfifo(fifo)
    for path in (fifo, "/dev/null", "/dev/zero"):
        for verb in ("report", "gate"):
            r = run(verb, path)
            assert r.returncode == 2 and b"not a regular file" in r.stderr, r.stderr
    # In a directory, a FIFO named *.db is not a database: the real one is read.
    d = tmp_path / "dir"
    d.mkdir()
    os.mkfifo(d / "a-fifo.db")
    hostile_db.seed(d / "b.db")
    assert run("report", d).returncode == 0
    # A FIFO named as a module, and a FIFO -wal beside the database.
    db = hostile_db.seed(tmp_path / "m.db")
    mod_fifo = tmp_path / "libfifo.so"
    os.mkfifo(mod_fifo)
    with sqlite3.connect(db) as c:
        c.execute("INSERT INTO stack VALUES(1, 1, 1, ?)", ((0x10000010).to_bytes(8, "little"),))
        c.execute("INSERT INTO module VALUES(1, ?, 0x10000000, 0x10000000, 0x20000000, NULL, 0, NULL)", (str(mod_fifo),))
        c.execute("UPDATE alloc SET stack_id=1")
    os.mkfifo(str(db) + "-wal")
    doc = check_json(run("report", "--format", "json", db).stdout)
    assert doc["findings"][0]["allocation"]["stack"][0]["module"] == str(mod_fifo)


def wal_db(path):
    hostile_db.seed(path)
    with sqlite3.connect(path) as c:
        c.execute("PRAGMA journal_mode=WAL")
    return path


def test_no_side_files_and_read_only_directory(tmp_path):
    d = Path(tempfile.mkdtemp(prefix="tpaudit-ro-"))
    try:
        os.chmod(d, 0o755)
        wal_db(d / "good.db")
        bad = d / "bad.db"
        shutil.copy(d / "good.db", bad)
        with open(bad, "r+b") as f:
            f.truncate(os.path.getsize(bad) // 2)
        (d / "text.db").write_text("not a database")
        before = sorted(p.name for p in d.iterdir())
        for p in (d / "good.db", bad, d / "text.db"):
            run("report", p)
        assert sorted(p.name for p in d.iterdir()) == before
        os.chmod(d, 0o555)
        os.chmod(d / "good.db", 0o444)
        users = [{}]
        if os.geteuid() == 0:  # root ignores modes: also read as nobody, where nobody may run the build
            users.append({"preexec_fn": lambda: os.setuid(65534)})
        for user in users:
            try:
                r = run("report", "--format", "json", d / "good.db", **user)
            except PermissionError:
                continue  # the build tree is not reachable for nobody here
            assert r.returncode == 0, r.stderr
            assert check_json(r.stdout)["findings"]
            assert sorted(p.name for p in d.iterdir()) == before
    finally:
        os.chmod(d, 0o755)
        shutil.rmtree(d)


def test_killed_run_with_wal_is_read_from_a_snapshot(tmp_path):
    db = tmp_path / "killed.db"
    c = sqlite3.connect(db, isolation_level=None)
    c.execute("PRAGMA journal_mode=WAL")
    c.executescript(hostile_db.SEED.replace("RANK_ID", "0"))
    c.execute("PRAGMA wal_autocheckpoint=0")
    c.execute("UPDATE tensor SET name='only.in.wal' WHERE key=100")
    wal = Path(str(db) + "-wal")
    assert wal.stat().st_size > 0
    files = sorted(tmp_path.iterdir())
    doc = check_json(run("report", "--format", "json", db).stdout)
    assert any("only.in.wal" in [f["tensor"]["name"]] + f["tensor"]["aliases"] for f in doc["findings"])
    assert sorted(tmp_path.iterdir()) == files
    c.close()


def test_locked_database_is_read_at_once(tmp_path):
    db = hostile_db.seed(tmp_path / "locked.db")
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    holder.execute("UPDATE run SET host='busy'")
    t0 = time.monotonic()
    r = run("report", db, timeout=4.5)  # no busy wait (it was 5 s, then "corrupt")
    assert r.returncode == 0 and b"node0" in r.stdout, r.stderr
    assert time.monotonic() - t0 < 4.5
    holder.execute("ROLLBACK")
    holder.close()


def test_concurrent_writer(tmp_path):
    """Reads while another process writes the database (WAL, growing
    tables, checkpoints): 1000 reads in the sanitized build."""
    reads = 1000 if SANITIZED else 100
    per_process = 25
    db = tmp_path / "live.db"
    writer = subprocess.Popen([sys.executable, str(Path(hostile_db.__file__)), str(db), "600"])
    try:
        for _ in range(200):
            if db.exists() and os.path.getsize(db) > 0:
                break
            time.sleep(0.05)
        time.sleep(0.3)
        codes = {}

        def read(i):
            verb = ["report", "--format", "json"] if i % 2 == 0 else ["gate"]
            r = run(*verb, *([db] * per_process))
            if r.returncode == 0 and verb[0] == "report":
                check_json(r.stdout)
            return r.returncode

        with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
            for code in pool.map(read, range(reads // per_process)):
                codes[code] = codes.get(code, 0) + 1
        assert writer.poll() is None, "the writer stopped early"
        print(f"\n{reads} reads during writes, exit codes per command: {codes}")
    finally:
        writer.kill()
        writer.wait()


def test_junit_one_suite_per_process(tmp_path):
    d = tmp_path / "runs"
    d.mkdir()
    for pid, clean in ((11, False), (12, True)):
        db = hostile_db.seed(d / f"p{pid}.db")
        with sqlite3.connect(db) as c:
            c.execute("UPDATE run SET rank=NULL, world_size=NULL, pid=?", (pid,))
            if clean:
                c.execute("DELETE FROM ref WHERE tensor_key=100")
                c.execute("DELETE FROM tensor WHERE key=100")
    root = ET.fromstring(run("report", "--format", "junit", d).stdout)
    suites = {s.get("name"): s for s in root.iter("testsuite")}
    # named by program (both ran finetune.py without a rank), numbered in the report's order, not by pid
    assert set(suites) == {"tpaudit.finetune.1", "tpaudit.finetune.2"}
    assert suites["tpaudit.finetune.1"].get("failures") != "0"
    assert suites["tpaudit.finetune.2"].get("failures") == "0"
    doc = check_json(run("report", "--format", "json", d).stdout)
    assert all(f["rank"] is None for f in doc["findings"])
    assert {(e["rank"], e["pid"]) for e in doc["totals"]["by_rank"]} == {(None, 11), (None, 12)}


def test_process_without_optimizer_is_never_inconclusive(tmp_path):
    db = hostile_db.seed(tmp_path / "launcher.db")
    with sqlite3.connect(db) as c:
        c.execute("DELETE FROM ref WHERE holder_kind='optimizer'")
        c.execute("UPDATE run SET complete=0, dropped_events=5")
    assert run("gate", db).returncode == 0
    twin = hostile_db.seed(tmp_path / "trainer.db")
    with sqlite3.connect(twin) as c:
        c.execute("UPDATE run SET complete=0")
    r = run("gate", twin)
    # Killed after an audit that saw stale tensors: that failure stands (exit 1) and the
    # run is still named inconclusive (a killed run with no error exits 3: test_cli.py).
    assert r.returncode == 1 and b"trainer.db: inconclusive: the run did not end cleanly" in r.stderr
    # A probe that went off cannot vouch for a run without optimizer audits.
    off = hostile_db.seed(tmp_path / "probe-off.db")
    with sqlite3.connect(off) as c:
        c.execute("DELETE FROM ref WHERE holder_kind='optimizer'")
        c.execute("UPDATE run SET python='off: internal error'")
    r = run("gate", off)
    assert r.returncode == 3 and b"no audit saw an optimizer (python probe off: internal error)" in r.stderr


def test_json_report_as_baseline_and_diff_side(tmp_path):
    db = hostile_db.seed(tmp_path / "s.db")
    report = tmp_path / "base.json"
    assert run("report", "--format", "json", "-o", report, db).returncode == 0
    assert run("gate", "--baseline", report, db).returncode == 0
    r = run("diff", report, db)
    assert r.returncode == 0 and b"no changes" in r.stdout
    clean = hostile_db.seed(tmp_path / "clean.db")
    with sqlite3.connect(clean) as c:
        c.execute("DELETE FROM ref WHERE tensor_key=100")
    clean_report = tmp_path / "clean.json"
    run("report", "--format", "json", "-o", clean_report, clean)
    assert run("gate", "--baseline", clean_report, db).returncode == 1
    assert run("diff", clean_report, db).returncode == 1
    assert run("diff", "--exit-zero", clean_report, db).returncode == 0
    (tmp_path / "notreport.json").write_text('{"format": "other"}')
    r = run("gate", "--baseline", tmp_path / "notreport.json", db)
    assert r.returncode == 2 and b"not a tpaudit report" in r.stderr


def test_golden_and_outputs_match_the_schema(tmp_path):
    check_json((SRC / "tests" / "analyzer" / "golden" / "seed.json").read_bytes())
    db = hostile_db.native_stale_db(tmp_path / "n.db", BUILD / "bin" / "region_host", 3, 8)
    check_json(run("report", "--format", "json", db).stdout)


def test_symbolization_is_bounded(tmp_path):
    """1000 stale tensors with 64-frame native stacks in a real ELF file, and
    one 200,000-frame stack: both finish well within the per-case limit
    (the figures are printed; bench numbers go in docs/ANALYZER.md)."""
    host = BUILD / "bin" / "region_host"
    if not shutil.which("nm"):
        pytest.skip("nm (binutils) not installed")
    many = hostile_db.native_stale_db(tmp_path / "many.db", host, 1000, 64)
    t0 = time.monotonic()
    doc = check_json(run("report", "--format", "json", many).stdout)
    t_many = time.monotonic() - t0
    stale = [f for f in doc["findings"] if f["kind"] == "stale_param" and f["tensor"]["name"].startswith("layer")]
    assert len(stale) == 1000
    frames = stale[0]["allocation"]["stack"]
    assert frames and any(fr["function"] and fr["file"] and fr["file"].endswith("region_host.c") for fr in frames), frames[:3]
    deep = hostile_db.native_stale_db(tmp_path / "deep.db", host, 1, 64, stack_depth_of_first=200000)
    t0 = time.monotonic()
    doc = check_json(run("report", "--format", "json", deep).stdout)
    t_deep = time.monotonic() - t0
    assert len(doc["findings"][0]["allocation"]["stack"]) <= 256
    print(f"\n1000 stale tensors with native stacks: {t_many:.2f} s; 200000-frame stack: {t_deep:.2f} s")
