"""The parts of each step marked with the live memory where each starts
(`tpaudit run --peak`, python/tpaudit/_phases.py, table phase_mark): a plain
training loop with no tpaudit in it, under the shim.

- With --peak, each step has its marks in order: forward (the root module,
  by class, then in steps 1 to 3 each submodule as it is called, by its
  dotted name),
  backward (from its start the module called last, then, in steps 1 to 3,
  each module's backward as the gradient reaches the input of the module
  called after it; later steps: the root module), optimizer_step (the optimizer's
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
# backward's in those steps: from its start, the module called last (head); as the gradient reaches head's
# input (act's output) act's backward starts, as it reaches act's input fc's (x, block's and fc's input,
# needs no gradient: no mark); later steps: the root module alone
BACKWARD = ["head", "block.act", "block.fc"]
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
        want += [(step, "backward", name) for name in (BACKWARD if step <= MODULE_STEPS else ["Sequential"])]
        want += [(step, "optimizer_step", "AdamW")]
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
        want += [(step, "backward", name) for name in (BACKWARD if step <= MODULE_STEPS else ["Sequential"])]
        want += [(step, "optimizer_step", "AdamW")]
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


GPT2 = """\
import sys
import torch
from transformers import GPT2Config, GPT2LMHeadModel
torch.manual_seed(0)
model = GPT2LMHeadModel(GPT2Config(n_layer=2, n_head=2, n_embd=64, vocab_size=256, n_positions=64))
if sys.argv[1] != "off":
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": sys.argv[1] == "reentrant"})
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
for step in range(2):
    x = torch.randint(0, 256, (2, 32))
    loss = model(x, labels=x).loss
    loss.backward()
    opt.step()
    opt.zero_grad()
    print("loss %d %r" % (step, loss.item()))
"""
LEAVES = ("ln_1", "attn.c_attn", "attn.c_proj", "ln_2", "mlp.c_fc", "mlp.act", "mlp.c_proj")


def gpt2_marks(tmp_path, mode):
    """HF GPT-2 (2 layers) on the CPU, plain and under `tpaudit run --peak`:
    step 1's forward and backward marks (owners, in order)."""
    (tmp_path / "gpt2.py").write_text(GPT2)
    argv = [sys.executable, str(tmp_path / "gpt2.py"), mode]
    env = {k: v for k, v in os.environ.items() if not k.startswith("TPAUDIT_")}
    env["HF_HUB_OFFLINE"] = "1"
    plain = subprocess.run(argv, capture_output=True, text=True, timeout=300, env=env)
    out = tmp_path / mode
    r = subprocess.run([TPAUDIT, "run", "-o", str(out), "--peak", "--", *argv], capture_output=True, text=True,
                       timeout=300, env=env)
    assert plain.returncode == r.returncode == 0, (plain.stderr, r.stderr)
    assert plain.stdout == r.stdout and plain.stdout.count("loss ") == 2  # the losses bitwise the same
    assert not [l for l in tpaudit_lines(r.stderr) if "probe part" in l], r.stderr
    (path,) = out.glob("*.db")
    rows = marks(sqlite3.connect(path))
    forward = [owner for step, phase, owner in rows if step == 1 and phase == "forward"]
    backward = [owner for step, phase, owner in rows if step == 1 and phase == "backward"]
    after = [phase for step, phase, _ in rows if step == 1][len(forward):]
    return forward, backward, after


def test_backward_marks_name_each_modules_backward(tmp_path):
    """Backward is marked module by module as the gradient reaches each
    marked module's input: from its start the module called last
    (lm_head), then each block's modules in the reverse of the order the
    forward called them, each block's attention and MLP named, so what a
    module's backward makes is that module's."""
    forward, backward, after = gpt2_marks(tmp_path, "off")
    assert after == ["backward"] * len(backward) + ["optimizer_step"], after
    assert backward[0] == "lm_head" and backward[1] == "transformer.ln_f", backward
    assert len(set(backward)) == len(backward)
    assert backward == [name for name in reversed(forward[1:]) if name in backward]  # the forward's order, reversed
    for block in (0, 1):
        assert {"transformer.h.%d.%s" % (block, leaf) for leaf in LEAVES} <= set(backward), backward
    assert backward.index("transformer.h.1.ln_1") < backward.index("transformer.h.0.mlp.c_proj")


def test_recomputation_is_marked_in_backward(tmp_path):
    """With gradient checkpointing (non-reentrant) each block's forward runs
    again inside backward: those calls mark the backward of each module
    recomputed (no forward mark between backward and the optimizer's
    step), then that block's backward module by module."""
    forward, backward, after = gpt2_marks(tmp_path, "on")
    assert after == ["backward"] * len(backward) + ["optimizer_step"], after
    for block in (0, 1):
        name = "transformer.h.%d" % block
        recomputed = backward.index(name)
        assert backward[recomputed:recomputed + 3] == [name, name + ".ln_1", name + ".attn"], backward
        for leaf in LEAVES:  # once recomputed, once as its backward runs
            assert backward.count("%s.%s" % (name, leaf)) == 2, (leaf, backward)
    assert backward.index("transformer.h.1") < backward.index("transformer.h.0")
