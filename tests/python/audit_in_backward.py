"""The end of a test script's training step (a `model` with an `lm_head`, a
batch `x`, tpaudit imported): the loss backpropagated with an audit inside
backward, as the logits' gradient arrives (a hook the lm_head's forward
put on its output) before any block's backward freed what it saved, then
its twin audit after backward.  Used by test_ledger.py and
test_activations.py."""
import os
import sqlite3
import subprocess
import sys
STEP = """
def audit_in_backward(grad):
    tpaudit.audit(label="in-backward")
def on_logits(module, args, out):
    out.register_hook(audit_in_backward)
model.lm_head.register_forward_hook(on_logits)
model(x, labels=x).loss.backward()
tpaudit.audit(label="after-backward")
"""


def run(tpaudit, tmp_path, text, *args):
    """Runs script `text` (with args) under `tpaudit run`; (its stdout, its
    database open, {label: audit id} of its finished audits, both audits of
    STEP among them): of the run's databases, the one that has both."""
    script = tmp_path / "step.py"
    script.write_text(text)
    out = tmp_path / "out"
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    r = subprocess.run([tpaudit, "run", "-o", str(out), "--", sys.executable, str(script), *args],
                       capture_output=True, text=True, timeout=600, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    # the program's database (inductor's compile workers, processes of their own, write theirs)
    for path in sorted(out.glob("*.db")):
        db = sqlite3.connect(path)
        audits = dict(db.execute("select label, id from audit where end_ns is not null"))
        if {"in-backward", "after-backward"} <= set(audits):
            return r.stdout, db, audits
        db.close()
    raise AssertionError("no database with both audits in %s" % sorted(out.glob("*.db")))


def rolled_up(by_module, module):
    """The bytes of module and of every module inside it ({module: bytes})."""
    return sum(b for name, b in by_module.items() if name == module or name.startswith(module + "."))
