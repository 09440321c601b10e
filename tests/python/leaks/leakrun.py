"""What the leak tests share: running a scenario under `tpaudit run` with the
default audit plan (no TPAUDIT_AUDIT: growth must be caught in a normal run),
reading the JSON report and the databases, and the checks every case makes
(the ledger adds up, an audit happened, the growth finding's fields)."""
import json
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SCENARIOS = HERE / "scenarios"
LIB = os.environ["TPAUDIT_TEST_LIB"]
TPAUDIT = str(Path(LIB).resolve().parents[1] / "bin" / "tpaudit")
sys.path.insert(0, str(SCENARIOS))  # the tests read the scenarios' sizes from them
# Steps of each scenario: warm-up (steps 1-3), three windows of 4 steps in
# which the probe suspects growth, then growth audits 4 steps apart.
STEPS = 32
LEDGER_TOLERANCE = 0.01  # the owners add up to the measured total within 1%
KIND = "memory_growth"


def audited(tmp_path, name, argv, fail_fast=False, env=None):
    """Runs argv under `tpaudit run`; returns (output dir, CompletedProcess)."""
    out = tmp_path / name
    e = dict(os.environ, PYTHONUNBUFFERED="1", HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false",
             PYTHONWARNINGS="ignore")
    for var in ("TPAUDIT_AUDIT", "TPAUDIT_FAIL_FAST"):
        e.pop(var, None)
    e.update(env or {})
    cmd = [TPAUDIT, "run", "-o", str(out)] + (["--fail-fast"] if fail_fast else []) + ["--", *map(str, argv)]
    return out, subprocess.run(cmd, env=e, capture_output=True, text=True, timeout=600, cwd=tmp_path)


def scenario(tmp_path, script, case, *args, fail_fast=False, ranks=0, name=None):
    argv = [sys.executable]
    if ranks:
        argv += ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(ranks)]
    argv += [SCENARIOS / script, case, *args]
    return audited(tmp_path, name or "-".join([case, *args]).replace("--", ""), argv, fail_fast=fail_fast)


def cli(*args):
    return subprocess.run([TPAUDIT, *map(str, args)], capture_output=True, text=True, timeout=300)


def report(out):
    r = cli("report", "--format", "json", out)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def growth(doc, rank="any"):
    return [f for f in doc["findings"] if f["kind"] == KIND and (rank == "any" or f["rank"] == rank)]


def one_growth(doc, rank="any"):
    """The one memory_growth finding (of a rank); on failure, says what the runs audited."""
    found = growth(doc, rank)
    runs = [{k: run.get(k) for k in ("rank", "audits", "audit_points", "ledger_total")} for run in doc["runs"]]
    assert len(found) == 1, {"memory_growth": found, "other findings": [f["kind"] for f in doc["findings"]],
                             "runs": runs}
    return found[0]


def tpaudit_lines(text):
    return [line for line in text.splitlines() if line.startswith("tpaudit:")]


def verdict_line(completed):
    lines = [line for line in tpaudit_lines(completed.stderr) if line.startswith("tpaudit: verdict:")]
    assert len(lines) == 1, completed.stderr
    return lines[0]


def line_of(script, marker):
    """The 1-based line of `# made:<marker>` in a scenario script."""
    lines = (SCENARIOS / script).read_text().splitlines()
    (n,) = [i + 1 for i, text in enumerate(lines) if text.rstrip().endswith("# made:" + marker)]
    return n


def frames(stack):
    """A stack as (file, line) pairs, user's frame first: a JSON array of
    frames, or text lines "file:line in function"."""
    if isinstance(stack, str):
        return [(m.group(1), int(m.group(2))) for m in re.finditer(r"([^\s:]+):(\d+) in ", stack)]
    return [(fr.get("file") or "", fr.get("line") or 0) for fr in stack or []]


def first_user_frame(stack):
    assert frames(stack), stack
    return frames(stack)[0]


def assert_ledger_adds_up(run):
    """The JSON ledger of one run (its judged audit) sums to its measured total within 1%."""
    ledger, total = run["ledger"], run["ledger_total"]
    assert ledger and total > 0, run
    owned = sum(row["bytes"] for row in ledger)
    assert abs(owned - total) <= LEDGER_TOLERANCE * total, (owned, total, ledger)
    assert all(row["bytes"] >= 0 and row["tensors"] >= 0 for row in ledger), ledger


def audits_with_ledgers(out):
    """Every closed audit of every database in out, in order, once per device of
    its ledger: (db file, audit row as a dict, the owners' rows as dicts, the
    device's 'measured' bytes or None).  An audit with no ledger row gives one
    entry with no owners."""
    result = []
    for db in sorted(Path(out).glob("*.db")):
        con = sqlite3.connect(str(db))
        con.row_factory = sqlite3.Row
        for audit in con.execute("select * from audit where end_ns is not null order by id"):
            query = "select * from ledger where audit_id=? order by rowid"
            rows = [dict(r) for r in con.execute(query, (audit["id"],))]
            for device in sorted({r["device"] for r in rows}) or [None]:
                mine = [r for r in rows if r["device"] == device]
                measured = [r["bytes"] for r in mine if r["owner_kind"] == "measured"]
                owners = [r for r in mine if r["owner_kind"] != "measured"]
                result.append((db.name, dict(audit), owners, measured[0] if measured else None))
        con.close()
    return result


def assert_every_ledger_adds_up(out):
    """At every closed audit, on every device: the owners' bytes add up to the
    measured bytes within 1%.  Only a run's last audit may have no ledger at all:
    one taken at exit, when no tensor is left."""
    audits = audits_with_ledgers(out)
    assert audits, "no audit closed"
    last = {}
    for db, audit, _, _ in audits:
        last[db] = audit["id"]
    for db, audit, owners, total in audits:
        owned = sum(r["bytes"] for r in owners)
        if not owners and total is None and audit["id"] == last[db]:
            continue
        assert total and owners, (db, audit, owners, total)
        assert abs(owned - total) <= LEDGER_TOLERANCE * total, (db, audit["label"], audit["step"], owned, total)
    return audits


def assert_clean_and_audited(out, completed, min_audits=2):
    """A twin: no finding at all, at least min_audits audits closed in each run,
    the ledger adds up at the judged audit and at every audit, the verdict is clean."""
    assert completed.returncode == 0, completed.stdout[-2000:] + completed.stderr[-4000:]
    doc = report(out)
    assert doc["findings"] == [], doc["findings"]
    trained = [run for run in doc["runs"] if run["python"] == "on" and run["audits"]]
    assert trained, doc["runs"]
    for run in trained:
        assert run["audits"] >= min_audits and not run["inconclusive"], run
        assert len(run["audit_points"]) == run["audits"], run
        assert_ledger_adds_up(run)
    assert_every_ledger_adds_up(out)
    assert "clean" in verdict_line(completed), completed.stderr
    assert cli("gate", out).returncode == 0
    return doc


def assert_growth(finding, rate_low, rate_high, path_words, steps):
    """A memory_growth finding: an error, its holder named with the user's words,
    its rate within [rate_low, rate_high] bytes per step, its bytes those of
    the steps kept by the judged audit."""
    assert finding["severity"] == "error", finding
    path = finding["holder"]["path"] or ""
    assert all(word in path for word in path_words), (path, path_words)
    rate = finding["growth"]["bytes_per_step"]
    assert rate_low <= rate <= rate_high, (rate, rate_low, rate_high)
    kept_steps = steps if finding["step"] == -1 else finding["step"]
    assert 0.9 * rate_low * kept_steps <= finding["bytes"] <= 1.1 * rate_high * kept_steps, finding
    assert finding["message"], finding
