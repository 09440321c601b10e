"""The verdict before the run ends (shim/verdict.c): one `tpaudit:` line at
the first audit with an error, judged in the process with the analyzer's own
queries; TPAUDIT_FAIL_FAST ends the run there with exit status 4 and a
complete database; tpaudit.audit(label=...) returns the findings and its
label reaches the text, JSON and HTML reports.  Real torch, real SQLite
files, the built shim and CLI; each must-find case has a clean twin that
asserts an audit happened."""
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

from audit_points import assert_every_audit, stale_from

HERE = Path(__file__).resolve().parent
LIB = os.environ["TPAUDIT_TEST_LIB"]
CLI = str(Path(LIB).resolve().parent.parent / "bin" / "tpaudit")
PROBE = str(Path(LIB).resolve().parent.parent / "share" / "tpaudit" / "python")
SEED = HERE / "scenarios" / "seed_embedding.py"

LABELLED = r'''
import sys
import torch
from torch import nn
import tpaudit
model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 4))
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
if sys.argv[1] == "buggy":
    model[2] = nn.Linear(8, 4)  # a policy replaces a layer after the optimizer
found = tpaudit.audit(label="after-policy")
print("FOUND", repr(found))
print("still running")
'''


# Audits that cannot see a model (models=[]) or an optimizer (optimizers=[]),
# then, with "train", two audited steps; "buggy" replaces the head first.
BLIND = r'''
import sys
import torch
from torch import nn
import tpaudit
model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 4))
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
if "buggy" in sys.argv:
    model[2] = nn.Linear(8, 4)
print("NO-MODEL", repr(tpaudit.audit(label="no-model", models=[])))
print("NO-OPTIMIZER", repr(tpaudit.audit(label="no-optimizer", optimizers=[])))
for _ in range(2 if "train" in sys.argv else 0):
    model(torch.randn(2, 4)).sum().backward()
    opt.step()
    opt.zero_grad()
print("still running")
'''
HEAD_BYTES = (8 * 4 + 4) * 4  # the replaced Linear(8, 4), fp32
NOT_JUDGED = {"step": -1, "stale_bytes": 0, "saw_model": False}
NO_OPTIMIZER = {"step": -1, "stale_bytes": 0, "saw_optimizer": False}  # audit(optimizers=[]): nothing to judge


def run_py(tmp_path, args, extra_env=None, preload=True):
    env = dict(os.environ, TPAUDIT_OUT=str(tmp_path), PYTHONUNBUFFERED="1")
    env.pop("TPAUDIT_FAIL_FAST", None)
    if preload:
        env["LD_PRELOAD"] = LIB
    env.update(extra_env or {})
    return subprocess.run([sys.executable, *map(str, args)], env=env, capture_output=True, text=True, timeout=300)


def tpaudit_lines(stderr):
    return [line for line in stderr.splitlines() if line.startswith("tpaudit:")]


def database(out):
    (db,) = Path(out).glob("*.db")
    return sqlite3.connect(str(db))


def cli(*args):
    return subprocess.run([CLI, *map(str, args)], capture_output=True, text=True, timeout=120)


def json_report(out):
    r = cli("report", "--format", "json", out)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def blind_run(tmp_path, *args, fail_fast=False):
    tmp_path.mkdir(exist_ok=True)
    script = tmp_path / "blind.py"
    script.write_text(BLIND)
    env = {"PYTHONPATH": PROBE}
    if fail_fast:
        env["TPAUDIT_FAIL_FAST"] = "1"
    r = run_py(tmp_path / "out", [script, *args], env)
    printed = dict(line.split(" ", 1) for line in r.stdout.splitlines() if line.startswith(("NO-MODEL", "NO-OP")))
    return r, printed, json_report(tmp_path / "out")


def test_seed_line_at_step_1(tmp_path):
    r = run_py(tmp_path, [SEED, "--order", "buggy", "--steps", "3"])
    assert r.returncode == 0, r.stderr
    (line,) = tpaudit_lines(r.stderr)
    assert line.startswith("tpaudit: at step 1: stale_param: AdamW param_groups[0].params[0] holds wte.weight "
                           "[50257,16], which is no longer a model parameter (3.1 MiB retained"), line
    assert "replaced at " in line and "seed_embedding.py:" in line and "stopping" not in line
    con = database(tmp_path)
    assert con.execute("select count(*) from audit where end_ns is not null").fetchone()[0] >= 2  # the run went on
    doc = json_report(tmp_path)
    assert_every_audit(doc, stale_from(doc, 1), steps=[1, 2])


def test_seed_fixed_says_nothing(tmp_path):
    r = run_py(tmp_path, [SEED, "--order", "fixed", "--steps", "3"])
    plain = run_py(tmp_path / "plain", [SEED, "--order", "fixed", "--steps", "3"], preload=False)
    assert r.returncode == plain.returncode == 0, r.stderr
    assert tpaudit_lines(r.stderr) == [] and r.stdout == plain.stdout
    con = database(tmp_path)
    assert con.execute("select label, step from audit where id=1").fetchone() == ("step", 1)  # an audit happened
    assert_every_audit(json_report(tmp_path), 0, steps=[1, 2])


def test_fail_fast_stops_at_step_1_with_a_complete_database(tmp_path):
    r = run_py(tmp_path, [SEED, "--order", "buggy", "--steps", "3"], {"TPAUDIT_FAIL_FAST": "1"})
    assert r.returncode == 4, r.stderr
    (line,) = tpaudit_lines(r.stderr)
    assert line.startswith("tpaudit: at step 1: stale_param:") and line.endswith(
        "; stopping the run (fail-fast, exit status 4)"), line
    con = database(tmp_path)
    assert con.execute("select complete, exit_status, ended_by from run").fetchone() == (1, 4, "exit")
    assert con.execute("select label, step, end_ns is not null from audit").fetchall() == [("step", 1, 1)]
    doc = json_report(tmp_path)
    assert [(f["kind"], f["tensor"]["name"]) for f in doc["findings"]][0] == ("stale_param", "wte.weight")
    assert cli("gate", "--max-retained", "0", tmp_path).returncode == 1
    assert_every_audit(doc, stale_from(doc, 1), steps=[1])


def test_fail_fast_leaves_a_correct_run_alone(tmp_path):
    r = run_py(tmp_path, [SEED, "--order", "fixed", "--steps", "3"], {"TPAUDIT_FAIL_FAST": "1"})
    assert r.returncode == 0 and tpaudit_lines(r.stderr) == [], r.stderr
    assert database(tmp_path).execute("select count(*) from audit").fetchone()[0] >= 2
    assert_every_audit(json_report(tmp_path), 0, steps=[1, 2])


def test_labelled_audit_returns_findings_and_keeps_its_label(tmp_path):
    script = tmp_path / "labelled.py"
    script.write_text(LABELLED)
    r = run_py(tmp_path / "out", [script, "buggy"], {"PYTHONPATH": PROBE})
    assert r.returncode == 0, r.stderr
    found = eval(r.stdout.split("FOUND ", 1)[1].splitlines()[0])  # a list of plain dicts
    stale = sorted((f["kind"], f["name"], f["bytes"]) for f in found if f["kind"] == "stale_param")
    assert stale == [("stale_param", "2.bias", 16), ("stale_param", "2.weight", 128)]
    assert all(set(f) == {"kind", "severity", "name", "bytes", "replaced_at", "message"} for f in found)
    assert all(f["severity"] == "error" and "labelled.py:9 in <module>" in f["replaced_at"] for f in found), found
    assert [line.split(":")[1] for line in tpaudit_lines(r.stderr)] == [' at audit "after-policy"']
    doc = json_report(tmp_path / "out")
    assert {f.get("label") for f in doc["findings"]} == {"after-policy"}
    assert doc["runs"][0]["audit_points"] == [{"step": -1, "stale_bytes": HEAD_BYTES}]  # its one audit
    text = cli("report", tmp_path / "out").stdout
    assert 'audited at "after-policy"' in text and 'audit "after-policy"' in text and "at exit" not in text
    html = cli("report", "--format", "html", tmp_path / "out").stdout
    assert "judged at audit &ldquo;after-policy&rdquo;" in html


def test_labelled_audit_of_a_clean_model_returns_nothing(tmp_path):
    script = tmp_path / "labelled.py"
    script.write_text(LABELLED)
    r = run_py(tmp_path / "out", [script, "fixed"], {"PYTHONPATH": PROBE})
    assert r.returncode == 0, r.stderr
    assert "FOUND []" in r.stdout and tpaudit_lines(r.stderr) == []
    con = database(tmp_path / "out")
    assert con.execute("select label from audit").fetchall() == [("after-policy",)]
    assert json_report(tmp_path / "out")["runs"][0]["audit_points"] == [{"step": -1, "stale_bytes": 0}]


def test_labelled_audit_under_fail_fast_ends_the_run(tmp_path):
    script = tmp_path / "labelled.py"
    script.write_text(LABELLED)
    r = run_py(tmp_path / "out", [script, "buggy"], {"PYTHONPATH": PROBE, "TPAUDIT_FAIL_FAST": "1"})
    assert r.returncode == 4 and "still running" not in r.stdout, r.stderr
    assert database(tmp_path / "out").execute("select complete, exit_status from run").fetchone() == (1, 4)
    assert json_report(tmp_path / "out")["runs"][0]["audit_points"] == [{"step": -1, "stale_bytes": HEAD_BYTES}]


def test_audit_that_saw_no_model_judges_nothing(tmp_path):
    """An audit that saw the optimizer but no model parameter calls nothing
    stale, even with a real bug: no line, no stop under fail-fast, audit()
    says None (not judged), its audit point says so; the first audited step,
    which sees the model, names the bug and stops the run.  An audit that saw
    no optimizer has no ownership to check: audit() returns no finding."""
    r, printed, doc = blind_run(tmp_path, "buggy", "train", fail_fast=True)
    assert r.returncode == 4 and "still running" not in r.stdout, r.stderr
    assert printed == {"NO-MODEL": "None", "NO-OPTIMIZER": "[]"}, r.stdout
    line = tpaudit_lines(r.stderr)[0]
    assert line.startswith("tpaudit: at step 1: stale_param: AdamW param_groups[0].params[3] holds 2.bias"), line
    assert line.endswith("; 4 errors, %d B retained at this audit; stopping the run (fail-fast, exit status 4)"
                         % HEAD_BYTES), line
    run = doc["runs"][0]
    assert not run["inconclusive"] and run["audit_points"] == [
        NOT_JUDGED, NO_OPTIMIZER, {"step": 1, "stale_bytes": HEAD_BYTES}], run
    assert sorted((f["kind"], f["tensor"]["name"], f["step"]) for f in doc["findings"]) == [
        ("stale_param", "2.bias", 1), ("stale_param", "2.weight", 1),
        ("untrained_param", "2.bias", 1), ("untrained_param", "2.weight", 1)]


def test_audit_that_saw_no_model_in_a_correct_run(tmp_path):
    r, printed, doc = blind_run(tmp_path, "train", fail_fast=True)
    assert r.returncode == 0 and "still running" in r.stdout and tpaudit_lines(r.stderr) == [], r.stderr
    assert printed == {"NO-MODEL": "None", "NO-OPTIMIZER": "[]"}, r.stdout
    run = doc["runs"][0]
    assert doc["findings"] == [] and not run["inconclusive"], doc
    assert run["audit_points"] == [NOT_JUDGED, NO_OPTIMIZER, {"step": 1, "stale_bytes": 0},
                                   {"step": 2, "stale_bytes": 0}], run
    assert cli("gate", tmp_path / "out").returncode == 0


def test_run_whose_audits_never_saw_a_model_is_inconclusive(tmp_path):
    """No audit that saw the optimizer saw the model: never an error (the
    head was replaced, but nothing could tell), the run is inconclusive, and
    the text headline, the HTML banner and the gate say so."""
    for order in ("buggy", "fixed"):
        r, printed, doc = blind_run(tmp_path / order, order)
        assert r.returncode == 0 and tpaudit_lines(r.stderr) == [], r.stderr
        assert printed["NO-MODEL"] == "None", r.stdout
        run = doc["runs"][0]
        assert doc["findings"] == [] and run["inconclusive"], doc
        assert run["why_inconclusive"] == "no audit that saw an optimizer saw a model parameter", run
        assert run["audit_points"] == [NOT_JUDGED, NO_OPTIMIZER], run
        out = tmp_path / order / "out"
        text = cli("report", out).stdout
        assert "verdict: INCONCLUSIVE - no audit that saw an optimizer saw a model parameter" in text, text
        assert "verdict: clean" not in text
        assert '<div class="verdict">INCONCLUSIVE</div>' in cli("report", "--format", "html", out).stdout
        assert cli("gate", out).returncode == 3


def test_probe_off_is_inconclusive_in_every_output(tmp_path):
    """TPAUDIT_PYTHON=off: no audit can see an optimizer, so the run is
    inconclusive; `run`'s line, `report`'s text headline, the HTML banner and
    `gate` (exit 3) all say so, none says clean."""
    out = tmp_path / "out"
    env = dict(os.environ, TPAUDIT_PYTHON="off")
    for name in ("TPAUDIT_OUT", "TPAUDIT_FAIL_FAST", "LD_PRELOAD"):
        env.pop(name, None)
    r = subprocess.run([CLI, "run", "-o", str(out), "--", sys.executable, str(SEED), "--order", "fixed", "--steps",
                        "2"], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    why = "no audit saw an optimizer (python probe off: TPAUDIT_PYTHON=off)"
    (line,) = [x for x in tpaudit_lines(r.stderr) if x.startswith("tpaudit: verdict:")]
    assert "INCONCLUSIVE: " + why in line, line
    text = cli("report", out).stdout
    assert text.splitlines()[1] == "verdict: INCONCLUSIVE - %s (gate exits 3)" % why, text
    assert "INCONCLUSIVE: " + why in text and "verdict: clean" not in text
    assert '<div class="verdict">INCONCLUSIVE</div>' in cli("report", "--format", "html", out).stdout
    assert cli("gate", out).returncode == 3
    assert json_report(out)["runs"][0]["audit_points"] == []


def test_verdict_of_an_audit_never_ended_is_refused(tmp_path):
    code = ("import ctypes, sys; lib = ctypes.CDLL(sys.argv[1]);"
            "from tpaudit._structs import VerdictStruct as V;"
            "v = V(); v.struct_size = ctypes.sizeof(V); v.audit_id = 7;"
            "print(lib.tpaudit_v1_audit_verdict(ctypes.byref(v)))")
    r = run_py(tmp_path, ["-c", code, LIB], {"PYTHONPATH": PROBE})
    assert r.stdout.strip() == "-2", r.stderr  # TPAUDIT_EINVAL


def test_an_older_callers_shorter_struct_is_filled_only_as_far_as_it_reaches(tmp_path):
    code = r'''
import ctypes, sys
from tpaudit._structs import VerdictStruct as V
lib = ctypes.CDLL(sys.argv[1])
lib.tpaudit_v1_audit_begin.restype = ctypes.c_int64
lib.tpaudit_v1_audit_begin.argtypes = [ctypes.c_char_p, ctypes.c_int64]
audit = lib.tpaudit_v1_audit_begin(b"step", 1)
assert lib.tpaudit_v1_audit_end(ctypes.c_int64(audit)) == 0
short = V.n_findings.offset  # a caller that knows the inputs only
raw = (ctypes.c_ubyte * ctypes.sizeof(V))(*([0xAA] * ctypes.sizeof(V)))
v = V.from_buffer(raw)
v.struct_size, v.audit_id, v.timeout_ms, v.findings, v.findings_cap = short, audit, 0, None, 0
rc = lib.tpaudit_v1_audit_verdict(ctypes.byref(v))
print(rc, all(b == 0xAA for b in bytes(raw)[short:]))
full = V(ctypes.sizeof(V), audit)
print(lib.tpaudit_v1_audit_verdict(ctypes.byref(full)), full.n_findings, full.n_errors, full.stop, full.exit_status)
'''
    r = run_py(tmp_path, ["-c", code, LIB], {"PYTHONPATH": PROBE})
    assert r.stdout.split() == ["0", "True", "0", "0", "0", "0", "4"], r.stdout + r.stderr
