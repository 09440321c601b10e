"""The parts of each step marked with the live memory where each starts
(`tpaudit run --peak`, python/tpaudit/_phases.py, table phase_mark): a plain
training loop with no tpaudit in it, under the shim.

- With --peak, each step has its marks in order: forward (the root module,
  by class, then in steps 1 to 3 each submodule as it is called, by its
  dotted name),
  backward (the root module), optimizer_step (the optimizer's
  class), outside (its zero_grad after the step); the program's output,
  files and exit status are the plain run's, and the losses are bitwise
  the same.  A loop that calls zero_grad between forward and backward (as
  the seed example does) has no outside part: that zero_grad is the step's.
- The twin, without --peak: no mark at all, the same output.
- The part broken on purpose turns off alone: one `tpaudit:` line naming
  it, the run and its audits go on.
Needs TPAUDIT_TEST_LIB (the built shim)."""
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "leaks"))
from leakrun import TPAUDIT, tpaudit_lines  # noqa: E402

STEPS = 4
LOOP = """\
import sys
import torch
ZERO_GRAD_FIRST = sys.argv[2] == "first"
torch.manual_seed(0)
torch.use_deterministic_algorithms(True)
from collections import OrderedDict
block = torch.nn.Sequential(OrderedDict(fc=torch.nn.Linear(64, 256), act=torch.nn.ReLU()))
model = torch.nn.Sequential(OrderedDict(block=block, head=torch.nn.Linear(256, 64)))
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
for step in range(%d):
    x = torch.randn(128, 64)
    loss = model(x).square().mean()
    if ZERO_GRAD_FIRST:
        opt.zero_grad()
    loss.backward()
    opt.step()
    if not ZERO_GRAD_FIRST:
        opt.zero_grad()
    print("loss %%d %%r" %% (step, loss.item()))
with open(sys.argv[1], "w") as f:
    f.write("done\\n")
sys.exit(3)
""" % STEPS
# the forward's marks: the root module by class, then each submodule by its dotted name as it is called,
# in the first MODULE_STEPS steps (later steps: the root module alone)
FORWARD = ["Sequential", "block", "block.fc", "block.act", "head"]
MODULE_STEPS = 3
BREAK = "import tpaudit._phases\ndef broken(*a):\n    raise AttributeError('gone')\ntpaudit._phases.PhaseMarks._record = broken\n"


def run(tmp_path, name, flags=(), site=None, zero_grad="last"):
    """The loop plain, then under `tpaudit run` with flags: (plain, audited, its database)."""
    (tmp_path / "loop.py").write_text(LOOP)
    env = dict(os.environ)
    for var in ("TPAUDIT_PEAK", "TPAUDIT_AUDIT", "TPAUDIT_FAIL_FAST"):
        env.pop(var, None)
    argv = [sys.executable, str(tmp_path / "loop.py")]
    plain = subprocess.run(argv + [tmp_path / f"{name}.plain", zero_grad], capture_output=True, text=True, timeout=300,
                           env=env)
    if site:
        (tmp_path / "site").mkdir()
        (tmp_path / "site" / "sitecustomize.py").write_text(site)
        env["PYTHONPATH"] = str(tmp_path / "site")
    out = tmp_path / name
    r = subprocess.run([TPAUDIT, "run", "-o", str(out), *flags, "--", *argv, tmp_path / f"{name}.traced", zero_grad],
                       capture_output=True, text=True, timeout=300, env=env)
    (path,) = out.glob("*.db")
    assert plain.returncode == r.returncode == 3, (plain.stderr, r.stderr)
    assert plain.stdout == r.stdout and plain.stdout.count("loss ") == STEPS
    assert (tmp_path / f"{name}.plain").read_text() == (tmp_path / f"{name}.traced").read_text() == "done\n"
    return plain, r, sqlite3.connect(path)


def marks(db):
    return db.execute("select step, phase, owner from phase_mark order by ts_ns").fetchall()


def test_each_step_marks_its_parts_in_order(tmp_path):
    _, r, db = run(tmp_path, "peak", ["--peak"])
    assert not [l for l in tpaudit_lines(r.stderr) if "probe part" in l], r.stderr
    want = []
    for step in range(1, STEPS + 1):
        want += [(step, "outside", None)] if step > 1 else []
        want += [(step, "forward", name) for name in (FORWARD if step <= MODULE_STEPS else FORWARD[:1])]
        want += [(step, "backward", "Sequential"), (step, "optimizer_step", "AdamW")]
    want.append((STEPS + 1, "outside", None))
    assert marks(db) == want
    lives = [live for (live,) in db.execute("select live_bytes from phase_mark")]
    assert all(live > 0 for live in lives)
    # the backward audits of --peak are there too (audits of steps 1 and 2: the default plan)
    assert ("backward", 1) in db.execute("select label, step from audit").fetchall()


def test_zero_grad_inside_the_step_marks_nothing(tmp_path):
    _, r, db = run(tmp_path, "first", ["--peak"], zero_grad="first")
    want = []
    for step in range(1, STEPS + 1):
        want += [(step, "forward", name) for name in (FORWARD if step <= MODULE_STEPS else FORWARD[:1])]
        want += [(step, "backward", "Sequential"), (step, "optimizer_step", "AdamW")]
    assert marks(db) == want


def test_twin_without_peak_marks_nothing(tmp_path):
    _, r, db = run(tmp_path, "plain")
    assert marks(db) == []
    assert db.execute("select count(*) from audit where label='step'").fetchone()[0] >= 1


def test_broken_marks_turn_off_alone(tmp_path):
    _, r, db = run(tmp_path, "broken", ["--peak"], site=BREAK)
    lines = [l for l in tpaudit_lines(r.stderr) if "probe part" in l]
    assert len(lines) == 1 and "phase_marks off" in lines[0] and "AttributeError('gone')" in lines[0], r.stderr
    assert marks(db) == []
    assert ("backward", 1) in db.execute("select label, step from audit").fetchall()
    python = db.execute("select python from run").fetchone()[0]
    assert "parts off: phase_marks" in python, python
