"""End-to-end tests of the tpaudit CLI on databases made by real runs:
every finding kind and its twin, the gate's exit codes, --baseline, diff,
JSON/JUnit/HTML output (HTML rendered in headless Chromium) and bad input.
Needs TPAUDIT_BUILD (the build tree) in the environment."""
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

BUILD = Path(os.environ["TPAUDIT_BUILD"])
SRC = Path(__file__).resolve().parents[2]
TPAUDIT = str(BUILD / "bin" / "tpaudit")
KINDS = SRC / "tests" / "analyzer" / "scenarios" / "kinds.py"
FINETUNE = SRC / "examples" / "finetune.py"


def tpaudit(*args, **kw):
    return subprocess.run([TPAUDIT, *map(str, args)], capture_output=True, text=True, **kw)


def audited_run(tmp_path, name, argv, env=None):
    out = tmp_path / name
    e = dict(os.environ, TPAUDIT_AUDIT="1,2", **(env or {}))
    r = tpaudit("run", "-o", out, "--", sys.executable, *argv, env=e)
    assert r.returncode == 0, r.stderr
    return out


def report_json(path):
    r = tpaudit("report", "--format", "json", path)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.fixture(scope="module")
def seed_runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("seed")
    return {order: audited_run(tmp, order, [FINETUNE, "--order", order, "--steps", "2", "--device", "cpu"])
            for order in ("buggy", "fixed")}


def test_seed_stale_param_and_untrained_successor(seed_runs):
    doc = report_json(seed_runs["buggy"])
    assert doc["format"] == "tpaudit-report" and doc["version"] == 1
    stale = [f for f in doc["findings"] if f["kind"] == "stale_param"]
    assert len(stale) == 1
    f = stale[0]
    assert f["tensor"]["name"] == "wte.weight" and f["tensor"]["shape"] == [50257, 64]
    assert f["retained_bytes"] == 50257 * 64 * 4 and f["has_grad"] is False
    assert f["successor"]["shape"] == [50260, 64] and "50257 -> 50260" in f["successor"]["relation"]
    assert any("finetune.py" in fr["file"] and fr["function"] == "pad_vocab" for fr in f["replaced_at"])
    untrained = [f for f in doc["findings"] if f["kind"] == "untrained_param"]
    assert len(untrained) == 1 and untrained[0]["severity"] == "error"
    assert doc["totals"]["retained_bytes"] == 50257 * 64 * 4


def test_seed_fixed_twin_reports_nothing(seed_runs):
    assert report_json(seed_runs["fixed"])["findings"] == []


@pytest.mark.parametrize("case,kind,severity", [
    ("orphan_state", "orphan_state", "error"),
    ("state_shape_mismatch", "state_shape_mismatch", "error"),
    ("stale_map_entry", "stale_map_entry", "error"),
    ("untrained_param", "untrained_param", "warning"),
])
def test_finding_kind_and_twin(tmp_path, case, kind, severity):
    doc = report_json(audited_run(tmp_path, "bug", [KINDS, case]))
    found = [f for f in doc["findings"] if f["kind"] == kind]
    assert found, doc["findings"]
    assert all(f["severity"] == severity for f in found)
    if kind in ("orphan_state", "stale_map_entry"):
        assert sum(f["retained_bytes"] for f in found) > 0
    twin = report_json(audited_run(tmp_path, "twin", [KINDS, case, "--twin"]))
    assert twin["findings"] == [], twin["findings"]


def test_stale_view_shows_its_storage_offset(tmp_path, seed_runs):
    """An optimizer keeps a view into a flat buffer the model's live bias
    still uses: the finding names the view's offset in every format."""
    run = audited_run(tmp_path, "view", [KINDS, "view"])
    doc = report_json(run)
    (stale,) = [f for f in doc["findings"] if f["kind"] == "stale_param"]
    assert stale["tensor"]["name"] == "0.weight" and stale["tensor"]["shape"] == [8, 8]
    assert stale["tensor"]["storage_offset"] == 8
    assert stale["retained_bytes"] == 0  # the live bias shares the storage
    text = tpaudit("report", run).stdout
    assert "view: a view at element offset 8 of a 288 B storage (256 B of its own)" in text, text
    html = tpaudit("report", "--format", "html", run).stdout
    assert "<dt>view</dt><dd>a view at element offset 8 of a 288 B storage (256 B of its own)</dd>" in html
    twin = report_json(audited_run(tmp_path, "twin", [KINDS, "view", "--twin"]))
    assert twin["findings"] == [] and twin["runs"][0]["audits"] >= 1
    seed = report_json(seed_runs["buggy"])
    assert seed["findings"] and all("storage_offset" not in f["tensor"] for f in seed["findings"])  # offset 0: as before


def test_gate_exit_codes(tmp_path, seed_runs):
    assert tpaudit("gate", seed_runs["fixed"]).returncode == 0
    failed = tpaudit("gate", "--max-retained", "64MiB", "--max-findings", "0", seed_runs["buggy"])
    assert failed.returncode == 1 and "FAIL max-findings" in failed.stdout and "ok   max-retained" in failed.stdout
    assert tpaudit("gate", "--max-retained", "1.5GiB", "--max-findings", "5", seed_runs["buggy"]).returncode == 0
    assert tpaudit("gate", "--max-retained", "12MiB", "--max-findings", "5", seed_runs["buggy"]).returncode == 1
    bad = tpaudit("gate", "--max-retained", "lots", seed_runs["buggy"])
    assert bad.returncode == 2 and bad.stderr.startswith("tpaudit:")
    # A two-word option given twice: the last one counts, as with every other option.
    text = tpaudit("gate", "--format", "junit", "--format", "text", seed_runs["buggy"])
    assert text.returncode == 1 and "FAIL" in text.stdout and "<testsuite" not in text.stdout, text.stdout
    junit = tpaudit("gate", "--format", "text", "--format", "junit", seed_runs["buggy"])
    assert junit.returncode == 1 and "<testsuite" in junit.stdout, junit.stdout
    killed = tmp_path / "killed"
    shutil.copytree(seed_runs["fixed"], killed)
    for db in killed.glob("*.db"):
        with sqlite3.connect(db) as c:
            c.execute("UPDATE run SET complete=0, end_ns=NULL")
    r = tpaudit("gate", killed)
    assert r.returncode == 3 and "inconclusive" in r.stderr
    assert tpaudit("gate", "--allow-incomplete", killed).returncode == 0
    # A failure stands beside a run that cannot be judged (a --fail-fast rank and the
    # rank its launcher killed): exit 1, the killed run still named on stderr.
    both = tpaudit("gate", seed_runs["buggy"], killed)
    assert both.returncode == 1 and "inconclusive" in both.stderr and "FAILED" in both.stdout, both.stdout + both.stderr


def gate_json(*args):
    r = tpaudit("gate", "--format", "json", *args)
    doc = json.loads(r.stdout)
    assert doc["format"] == "tpaudit-gate" and doc["version"] == 1, doc
    return r.returncode, doc


def test_gate_json_gives_each_rule_measurement_limit_and_outcome(tmp_path, seed_runs):
    code, doc = gate_json("--max-retained", "64MiB", "--max-findings", "0", "--max-growth", "1MiB", seed_runs["buggy"])
    assert code == 1 and doc["outcome"] == "failed" and doc["passed"] is False, doc
    rules = {rule["rule"]: rule for rule in doc["rules"]}
    assert set(rules) == {"max-retained", "max-growth", "max-findings (errors)"}, doc
    retained, growth, count = rules["max-retained"], rules["max-growth"], rules["max-findings (errors)"]
    assert retained["unit"] == "bytes" and retained["limit"] == 64 << 20 and retained["outcome"] == "passed", doc
    assert 0 < retained["measured"] <= retained["limit"] and retained["passed"] is True, doc
    assert growth["unit"] == "bytes/step" and growth["limit"] == 1 << 20 and growth["outcome"] == "passed", doc
    assert count["unit"] == "findings" and count["limit"] == 0 and count["measured"] > 0, doc
    assert count["outcome"] == "failed" and count["passed"] is False and count["rank"] is None, doc
    # The same measurements as the text (and as the JSON report's gate), one document on stdout.
    text = tpaudit("gate", "--max-retained", "64MiB", "--max-findings", "0", "--max-growth", "1MiB", seed_runs["buggy"])
    assert "FAIL max-findings (errors) on all ranks: measured %d, limit 0" % count["measured"] in text.stdout, text.stdout
    # The clean twin: every rule judged, every one passed.
    code, doc = gate_json(seed_runs["fixed"])
    assert code == 0 and doc["outcome"] == "passed" and doc["passed"] is True, doc
    assert [r["rule"] for r in doc["rules"]] == ["max-retained", "max-findings (errors)"], doc
    assert all(r["outcome"] == "passed" and r["measured"] == 0 for r in doc["rules"]), doc
    # Inconclusive: exit 3, the rules that were judged still given.
    killed = tmp_path / "killed"
    shutil.copytree(seed_runs["fixed"], killed)
    for db in killed.glob("*.db"):
        with sqlite3.connect(db) as c:
            c.execute("UPDATE run SET complete=0, end_ns=NULL")
    code, doc = gate_json(killed)
    assert code == 3 and doc["outcome"] == "inconclusive" and doc["passed"] is False and doc["rules"], doc
    bad = tpaudit("gate", "--format", "yaml", seed_runs["fixed"])
    assert bad.returncode == 2 and bad.stderr == "tpaudit: gate --format takes text, junit or json\n", bad.stderr


def test_baseline_and_diff(tmp_path, seed_runs):
    assert tpaudit("gate", "--baseline", seed_runs["buggy"], seed_runs["buggy"]).returncode == 0
    grown = audited_run(tmp_path, "grown", [FINETUNE, "--order", "buggy", "--steps", "2", "--channels", "96", "--device", "cpu"])
    r = tpaudit("gate", "--baseline", seed_runs["buggy"], grown)
    assert r.returncode == 1, r.stdout
    d = tpaudit("diff", seed_runs["buggy"], grown)
    assert d.returncode == 1 and "grew" in d.stdout
    assert tpaudit("diff", "--exit-zero", seed_runs["buggy"], grown).returncode == 0
    d = tpaudit("diff", seed_runs["fixed"], seed_runs["buggy"])
    assert d.returncode == 1 and "appeared" in d.stdout
    d = tpaudit("diff", seed_runs["buggy"], seed_runs["fixed"])
    assert d.returncode == 0 and "disappeared" in d.stdout


def test_junit_is_valid_xml(tmp_path, seed_runs):
    out = tmp_path / "r.xml"
    assert tpaudit("report", "--format", "junit", "-o", out, seed_runs["buggy"]).returncode == 0
    root = ET.parse(out).getroot()
    assert root.tag == "testsuites"
    cases = {c.get("name"): c for c in root.iter("testcase")}
    assert cases["stale_param"].find("failure") is not None
    assert cases["orphan_state"].find("failure") is None


def test_html_renders_in_chromium_and_escapes(tmp_path):
    chromium = shutil.which("chromium")
    if not chromium:
        pytest.skip("chromium not installed")
    run = audited_run(tmp_path, "html", [KINDS, "html_name"])
    html = tmp_path / "report.html"
    assert tpaudit("report", "--format", "html", "-o", html, run).returncode == 0
    text = html.read_text()
    assert "<script>alert(1)</script>" not in text and "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    flags = ["--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={tmp_path / 'prof'}"]
    dom = subprocess.run([chromium, *flags, "--dump-dom", html.as_uri()], capture_output=True, text=True, timeout=120).stdout
    assert 'id="findings"' in dom and "stale_param" in dom and "<svg" in dom or "no allocation records" in dom
    assert "<script>" not in dom.split("<body>", 1)[1]
    shot = BUILD / "tests" / "html-report.png"
    shot.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([chromium, *flags, f"--screenshot={shot}", "--window-size=1200,900", html.as_uri()],
                   capture_output=True, timeout=120)
    assert shot.exists() and shot.stat().st_size > 1000


def test_bad_inputs(tmp_path, seed_runs):
    db = next(seed_runs["fixed"].glob("*.db"))
    cases = {}
    (tmp_path / "text.db").write_text("hello, not a database\n")
    cases["not a SQLite database"] = tmp_path / "text.db"
    trunc = tmp_path / "trunc.db"
    data = db.read_bytes()
    trunc.write_bytes(data[: len(data) // 3])
    cases["corrupt or truncated"] = trunc
    newer = tmp_path / "newer.db"
    shutil.copy(db, newer)
    with sqlite3.connect(newer) as c:
        c.execute("PRAGMA user_version=99")
    cases["newer than this tpaudit reads"] = newer
    foreign = tmp_path / "foreign.db"
    with sqlite3.connect(foreign) as c:
        c.execute("CREATE TABLE songs(title TEXT)")
    cases["not a tpaudit database"] = foreign
    (tmp_path / "empty").mkdir()
    cases["holds no tpaudit databases"] = tmp_path / "empty"
    cases["no such file or directory"] = tmp_path / "missing.db"
    for message, path in cases.items():
        for verb in ("report", "gate"):
            out = tmp_path / f"{path.name}.{verb}.out"
            extra = ["-o", out] if verb == "report" else []
            r = tpaudit(verb, *extra, path)
            assert r.returncode == 2, (message, r.stderr)
            lines = r.stderr.strip().splitlines()
            assert len(lines) == 1 and lines[0].startswith("tpaudit:") and message in lines[0], lines
            assert not out.exists()
    r = tpaudit("report", "-o", tmp_path / "no" / "such" / "dir" / "r.txt", seed_runs["fixed"])
    assert r.returncode == 2 and r.stderr.startswith("tpaudit:")
    assert tpaudit("frobnicate").returncode == 2
    for verb in ("run", "report", "gate", "diff", "kinds"):
        assert tpaudit(verb, "--help").returncode == 0


def test_native_region_stack_is_symbolized(tmp_path):
    host = BUILD / "bin" / "region_host"
    r = tpaudit("run", "-o", tmp_path / "native", "--", host)
    assert r.returncode == 0, r.stderr
    doc = report_json(tmp_path / "native")
    (stale,) = [f for f in doc["findings"] if f["kind"] == "stale_param"]
    assert stale["retained_bytes"] == 100 * 16 * 4
    assert stale["successor"]["shape"] == [104, 16]
    alloc = stale["allocation"]
    assert alloc["bytes"] == 2 * 100 * 16 * 4
    functions = [fr.get("function") for fr in alloc["stack"]]
    demangled = "native::carve_parameter_arena(unsigned long)"
    assert demangled in functions, alloc["stack"]
    frame = alloc["stack"][functions.index(demangled)]
    assert frame["file"].endswith("region_host.c") and frame["line"] > 0
    text = tpaudit("report", tmp_path / "native").stdout
    assert "allocated at" in text and demangled in text


def test_golden_json(tmp_path):
    """Two rank databases built from a fixed SQL script give byte-identical JSON."""
    template = (SRC / "tests" / "analyzer" / "fixtures" / "seed.sql.in").read_text()
    for rank in (0, 1):
        with sqlite3.connect(tmp_path / f"tpaudit-node0-{4242 + rank}.db") as c:
            c.executescript(template.replace("RANK_ID", str(rank)))
    r = tpaudit("report", "--format", "json", tmp_path)
    assert r.returncode == 0, r.stderr
    golden = SRC / "tests" / "analyzer" / "golden" / "seed.json"
    if os.environ.get("TPAUDIT_UPDATE_GOLDEN"):
        golden.write_text(r.stdout)
    assert r.stdout == golden.read_text()
