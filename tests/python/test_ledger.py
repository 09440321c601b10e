"""The probe's memory ledger and holder paths (python/tpaudit/_ledger.py,
_holders.py, _growth.py): each holder pattern is named as the user writes
it, the walk never runs the user's code and keeps nothing alive, a failing
walk turns itself off with one line while the audit goes on, and the
ledger's owners add up to the live storages, on the CPU within 1% of what
the program made, at every audit of a real run under `tpaudit run`."""
import json
import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import audit_in_backward

LIB = os.environ["TPAUDIT_TEST_LIB"]
BUILD = Path(LIB).parents[1]
TPAUDIT = str(BUILD / "bin" / "tpaudit")
PROBE = str(BUILD / "share" / "tpaudit" / "python")
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "ledger_db.py"
SAVED_IN = "saved for backward in "  # TPAUDIT_SAVED_IN of include/tpaudit.h, as a report reads it


def run_script(tmp_path, body):
    """Runs body (which prints one JSON line) with the built probe importable."""
    script = tmp_path / "case.py"
    script.write_text("import sys\nsys.path.insert(0, %r)\n" % PROBE + textwrap.dedent(body))
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1]), r.stderr


PATHS = """
import collections, functools, json
import torch
from tpaudit import _holders

kept = [torch.zeros(3) for _ in range(4)]

class Trainer:
    shared = [torch.ones(2)]
    def __init__(self):
        self.history = []
        self.callbacks = [None, None, type("Cb", (), {})()]
        self.callbacks[2].outputs = {"logits": [torch.ones(1)]}
    def fit(self, probe):
        self.history.append(torch.ones(4))
        return probe(self)

def make_hook():
    acts = []
    def save(module, args, out):
        acts.append(out.detach())
    return save
model = torch.nn.Linear(2, 2)
model.register_forward_hook(make_hook())
model(torch.ones(2))

@functools.lru_cache
def features(n):
    return torch.ones(n)
features(3)

def gen():
    buf = torch.ones(7)
    yield 1
g = gen(); next(g)
window = collections.deque(maxlen=3); window.append(torch.ones(9))

def main():
    trainer = Trainer()
    def probe(self):
        hook = next(iter(model._forward_hooks.values()))
        ts = {"kept": kept[3], "history": self.history[0], "shared": Trainer.shared[0],
              "hook": hook.__closure__[0].cell_contents[0], "cache": features(3),
              "generator": g.gi_frame.f_locals["buf"], "deque": window[0],
              "callbacks": trainer.callbacks[2].outputs["logits"][0]}
        targets = list(ts.values())
        del hook
        found = _holders.find(targets, "/nonexistent/", ignore={id(targets), id(ts)})
        return {k: (found[id(t)][:3] if id(t) in found else None) for k, t in ts.items()}
    return trainer.fit(probe)

print(json.dumps(main()))
"""


def test_holder_paths_as_the_user_writes_them(tmp_path):
    got, _ = run_script(tmp_path, PATHS)
    assert got["kept"] == ["__main__.kept[3]", "__main__.kept", "list"]
    # the innermost frame's `self` (Trainer.fit) before main()'s `trainer`
    assert got["history"] == ["self.history[0] of a Trainer", "self.history of a Trainer", "list"]
    assert got["shared"] == ["Trainer.shared[0]", "Trainer.shared", "list"]
    assert got["callbacks"][1] == "self.callbacks[2].outputs['logits'] of a Trainer"
    assert got["hook"][1] == "__main__.model._forward_hooks[0]<closure acts of make_hook.<locals>.save>"
    assert got["cache"][0] == "__main__.features<lru_cache>"
    assert got["generator"][0] == "__main__.g<generator gen>.buf"
    assert got["deque"] == ["__main__.window[0]", "__main__.window", "deque"]


HOSTILE = """
import json, weakref, gc
import torch
from tpaudit import _holders

calls = []

class Meta(type):
    def __getattribute__(cls, name):
        if name not in ("__mro__", "__dict__", "__name__", "__qualname__"):
            calls.append("meta." + name)
        return super().__getattribute__(name)

class Hostile(metaclass=Meta):
    def __init__(self):
        object.__setattr__(self, "t", torch.ones(5))
    def __getattr__(self, name):
        calls.append("getattr " + name); raise AttributeError(name)
    def __getattribute__(self, name):
        if name != "__dict__":
            calls.append("getattribute " + name)
        return object.__getattribute__(self, name)
    def __repr__(self):
        calls.append("repr"); return "Hostile"
    def __eq__(self, other):
        calls.append("eq"); return False
    def __hash__(self):
        calls.append("hash"); return 1
    @property
    def __class__(self):
        calls.append("__class__"); return int

class Key:
    def __repr__(self):
        calls.append("key repr"); return "k"
    def __eq__(self, other):
        calls.append("key eq"); return self is other
    def __hash__(self):
        return 7

holder = Hostile()
table = {Key(): torch.ones(6)}
targets = [object.__getattribute__(holder, "t"), next(iter(table.values()))]
ref = weakref.ref(targets[0])
found = _holders.find(targets, "/nonexistent/", ignore={id(targets)})
paths = [found[id(t)][0] for t in targets]
del targets, found
object.__setattr__(holder, "t", None)
print(json.dumps({"paths": paths, "calls": calls, "alive": ref() is not None}))
"""


def test_walk_never_runs_user_code_and_keeps_nothing(tmp_path):
    got, _ = run_script(tmp_path, HOSTILE)
    assert got["calls"] == [], got["calls"]
    assert got["paths"] == ["__main__.holder.t", "__main__.table[<Key>]"]
    assert got["alive"] is False  # the walk kept no reference to the tensor


ADDS_UP = """
import json
import torch
from tpaudit import _growth, _ledger, _parts

class Rows:
    def __init__(self):
        self.rows = []
    def ledger(self, row):
        self.rows.append(row)

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 512))
opt = torch.optim.AdamW(model.parameters())
kept = []
for _ in range(3):
    out = model(torch.randn(32, 64))
    out.sum().backward(retain_graph=True)
    opt.step()
    kept.append(out)  # with its graph
del out
made = sum(p.numel() * 4 for p in model.parameters()) * 4  # params, grads, exp_avg, exp_avg_sq
made += 3 * 32 * 512 * 4                                   # the kept outputs
made += 3 * (32 * 64 + 32 * 256) * 4                       # their graphs: each input and ReLU output

rec = Rows()
_ledger.record(rec, [model], [opt])
failing = Rows()
leaks = _growth.Leaks()
leaks.on = True
def broken(*args, **kwargs):
    raise RuntimeError("walk failed")
_ledger._holders.find = broken
leaks.ledger(failing, [model], [opt])
print(json.dumps({"rows": rec.rows, "made": made, "failing": failing.rows, "walk": _parts.on("holder_walk")}))
"""


def test_owners_add_up_and_a_failing_walk_turns_off(tmp_path):
    got, err = run_script(tmp_path, ADDS_UP)
    rows = got["rows"]
    measured = [r for r in rows if r["owner_kind"] == "measured"]
    assert len(measured) == 1 and measured[0]["device"] == "cpu"
    total = measured[0]["bytes"]
    assert sum(r["bytes"] for r in rows if r["owner_kind"] != "measured") == total
    assert abs(total - got["made"]) <= 0.01 * got["made"], (total, got["made"])
    kinds = {(r["owner_kind"], r["owner"]): r for r in rows}
    held = kinds[("held", "__main__.kept")]
    assert held["tensors"] == 3 and held["with_graph"] == 3 and held["path"] == "__main__.kept[2]"
    assert held["shapes"] == "[[32,512]]" and held["dtype"] == "float32"
    params = sum(r["bytes"] for r in rows if r["owner_kind"] == "parameter")
    assert kinds[("optimizer_state", "AdamW")]["bytes"] == 2 * params + 4 * 4  # and a step scalar each
    assert ("autograd", "autograd graph of __main__.kept") in kinds
    # the failing walk: one line, the walk off, the ledger still written without holders
    assert err.count("tpaudit:") == 1 and "probe part holder_walk off" in err
    assert got["walk"] is False
    failing = got["failing"]
    assert any(r["owner_kind"] == "parameter" for r in failing)
    assert not any(r["owner_kind"] == "held" for r in failing)
    f_total = next(r["bytes"] for r in failing if r["owner_kind"] == "measured")
    assert sum(r["bytes"] for r in failing if r["owner_kind"] != "measured") == f_total


def ledger_sums(db):
    """{audit id: (measured, sum of the owners)} of the cpu ledger."""
    out = {}
    for audit, kind, nbytes in db.execute("select audit_id, owner_kind, bytes from ledger where device='cpu'"):
        m, s = out.get(audit, (0, 0))
        out[audit] = (m + nbytes, s) if kind == "measured" else (m, s + nbytes)
    return out


def test_every_audit_of_a_run_has_a_ledger_that_adds_up(tmp_path):
    for twin in (False, True):
        out = tmp_path / ("twin" if twin else "leak")
        argv = [TPAUDIT, "run", "-o", str(out), "--", sys.executable, str(EXAMPLE)] + (["--twin"] if twin else [])
        subprocess.run(argv, capture_output=True, text=True, timeout=600)
        (path,) = out.glob("*.db")
        db = sqlite3.connect(path)
        audits = db.execute("select id, label, step from audit where end_ns is not null order by id").fetchall()
        assert [a[1:] for a in audits[:2]] == [("step", 1), ("step", 2)]
        sums = ledger_sums(db)
        assert set(sums) == {a[0] for a in audits}  # a ledger at every audit
        for audit, (measured, owners) in sums.items():
            assert measured > 0 and owners == measured, (audit, measured, owners)
        steps = [s for (s,) in db.execute("select step from sample order by step")]
        assert steps == list(range(1, 25))
        if not twin:
            growth = [a for a in audits if a[1] == "growth"]
            assert len(growth) >= 3, audits
            last = growth[-1][0]
            row = db.execute("select path, tensors, created_at from ledger where audit_id=? and owner_kind='held' "
                             "and owner='__main__.kept'", (last,)).fetchone()
            assert row[0] == "__main__.kept[23]" and row[1] == 24
            before = db.execute("select created_at from ledger where owner='__main__.kept' and created_at is not null"
                                ).fetchone()
            assert before and before[0].startswith(str(EXAMPLE) + ":28:main")


WATCH = """
import json
from tpaudit import _allocator, _growth

class Rows:
    def sample(self, *args):
        pass

MiB = 1 << 20
patterns = {
    "leak": lambda s: 100 * MiB + s * MiB,
    "warm_up_then_flat": lambda s: 100 * MiB + min(s, 3) * 50 * MiB,
    "one_jump_at_20": lambda s: 100 * MiB + (30 * MiB if s >= 20 else 0),
    "sawtooth_4": lambda s: 100 * MiB + (s % 4) * MiB,
    "deque_maxlen_5": lambda s: 100 * MiB + min(s, 5) * MiB,
}
out = {}
for name, live in patterns.items():
    step = [0]
    _allocator.live_bytes = lambda: (live(step[0]), -1, "cpu")
    w = _growth.Watch(Rows(), limit=4)
    labels = []
    for s in range(1, 61):
        step[0] = s
        if w.sample(s) == "growth":
            labels.append(s)
    out[name] = labels
print(json.dumps(out))
"""


def test_growth_audits_follow_growth_not_warm_up_or_bounded_patterns(tmp_path):
    got, _ = run_script(tmp_path, WATCH)
    assert got["leak"] == [5, 6, 7, 11]  # samples 3, 4, 5 rise: then 1, 2 and 6 steps on
    for bounded in ("warm_up_then_flat", "one_jump_at_20"):
        assert got[bounded] == [], (bounded, got[bounded])
    # a sawtooth of 4 rises over three samples inside one cycle (steps 4-6), a deque of 5 while
    # it fills (steps 3-5): growth audits are taken, and the holder's fall or flat bytes at them
    # keep the run clean (the analyzer's rule; tests/python/leaks' twins)
    assert got["sawtooth_4"] == [6, 7, 8, 12], got["sawtooth_4"]
    assert got["deque_maxlen_5"] == [5, 6, 7, 11], got["deque_maxlen_5"]


EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
# the demo (scripts/demo.sh runs finetune.py in both orders) and the examples, as the README runs them
DEMO_AND_EXAMPLES = [
    ("finetune.py", "--order", "buggy"),
    ("finetune.py", "--order", "fixed"),
    ("resize_after_optimizer.py", "--case", "lm-head"),
    ("resize_after_optimizer.py", "--case", "tied"),
    ("ledger_db.py",),
    ("ledger_db.py", "--twin"),
]


def test_demo_and_examples_leave_under_one_percent_unattributed(tmp_path):
    """At each default audit (steps 1, 2, exit) and every other audit the
    runs took, every device's unattributed bytes are under 1% of measured:
    the holder walk names what the loops' locals and globals hold."""
    for i, (script, *args) in enumerate(DEMO_AND_EXAMPLES):
        out = tmp_path / str(i)
        env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONWARNINGS="ignore")
        for var in ("TPAUDIT_AUDIT", "TPAUDIT_FAIL_FAST"):
            env.pop(var, None)
        r = subprocess.run([TPAUDIT, "run", "-o", str(out), "--", sys.executable, str(EXAMPLES / script), *args],
                           capture_output=True, text=True, timeout=600, env=env)
        assert r.returncode in (0, 1), r.stderr[-3000:]
        (path,) = out.glob("*.db")
        db = sqlite3.connect(path)
        audits = db.execute("select id, label, step from audit where end_ns is not null order by id").fetchall()
        assert audits and audits[0][1:] == ("step", 1), (script, args, audits)  # an audit happened
        for audit_id, label, step in audits:
            rows = db.execute("select device, owner_kind, bytes from ledger where audit_id=?", (audit_id,)).fetchall()
            for device in {d for d, _, _ in rows}:
                measured = sum(b for d, k, b in rows if d == device and k == "measured")
                left = sum(b for d, k, b in rows if d == device and k == "unattributed")
                assert left <= 0.01 * measured, (script, args, label, step, device, left, measured, rows)
        db.close()


# HF GPT-2 (2 layers) whose loss's graph no variable keeps (`model(...).loss.backward()`): an
# audit taken inside backward, as the logits' gradient arrives (a hook the lm_head's forward
# put on its output), before any block's backward ran; and its twin audit after backward
IN_BACKWARD = """
import sys
import torch
from transformers import GPT2Config, GPT2LMHeadModel
import tpaudit
torch.manual_seed(0)
model = GPT2LMHeadModel(GPT2Config(n_layer=2, n_head=2, n_embd=64, vocab_size=512, n_positions=64))
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
x = torch.randint(0, 512, (4, 32))
""" + audit_in_backward.STEP + """
print("done")
"""

# The same model whose output a variable keeps (`out = model(...)`, as a training step does):
# the model's graph is then `out`'s, and only the loss's own part (its log_softmax over the
# logits) is the step's; an audit as the loss's gradient arrives, before any node of it ran
HELD_OUT = IN_BACKWARD.replace("""def on_logits(module, args, out):
    out.register_hook(audit_in_backward)
model.lm_head.register_forward_hook(on_logits)
model(x, labels=x).loss.backward()""", """out = model(x, labels=x)
out.loss.register_hook(audit_in_backward)
out.loss.backward()""")


def test_a_steps_saved_tensors_are_named_by_the_module_that_made_them(tmp_path):
    """Tensors saved for backward by a graph no named holder keeps are this
    step's; each is the module's whose forward made it, the deepest one
    (_made_by.py; test_activations.py compares the bytes with MemTracker's):
    both blocks, each with the modules inside it, save the same bytes,
    nearly all of the graph is named so, and after backward nothing is left
    saved."""
    stdout, db, audits = audit_in_backward.run(TPAUDIT, tmp_path, IN_BACKWARD)
    assert "done" in stdout, stdout

    def saved(label):
        rows = db.execute("select owner_kind, owner, sum(bytes) from ledger where audit_id=? and device='cpu'"
                          " and owner_kind in ('autograd', 'unattributed') group by owner_kind, owner",
                          (audits[label],)).fetchall()
        by_module = {o[len(SAVED_IN):]: b for k, o, b in rows if k == "autograd" and o.startswith(SAVED_IN)}
        unnamed = sum(b for k, o, b in rows if k == "unattributed")
        return by_module, unnamed

    by_module, unnamed = saved("in-backward")
    def rolled_up(module):
        return audit_in_backward.rolled_up(by_module, module)

    for part in ("attn", "mlp"):  # each block's attention and MLP save the same bytes
        assert 0 < rolled_up("transformer.h.0." + part) == rolled_up("transformer.h.1." + part), by_module
    blocks = [rolled_up("transformer.h.%d" % i) for i in range(2)]  # block 0 also the embedding dropout's output
    assert blocks[1] > 0 and abs(blocks[0] - blocks[1]) <= 0.05 * blocks[1], by_module
    assert sum(by_module.values()) >= 0.95 * (sum(by_module.values()) + unnamed), (by_module, unnamed)
    after, _ = saved("after-backward")
    assert after == {}, after


def test_a_losss_saved_tensors_are_the_modules_whose_output_it_reads(tmp_path):
    """A loss whose model output a variable keeps: the log_softmax it saved
    is the model's own (GPT2LMHeadModel.forward computes the loss from the
    lm_head's output), found through the lm_head's node, which `out`'s graph
    holds; nothing is left unattributed (on the GPU this was the whole
    logits-sized tensor of an OOM in backward)."""
    assert HELD_OUT != IN_BACKWARD
    script = tmp_path / "held_out.py"
    script.write_text(HELD_OUT)
    out = tmp_path / "out"
    r = subprocess.run([TPAUDIT, "run", "-o", str(out), "--", sys.executable, str(script)], capture_output=True,
                       text=True, timeout=600, env=dict(os.environ, HF_HUB_OFFLINE="1"))
    assert r.returncode == 0 and "done" in r.stdout, r.stdout + r.stderr
    (path,) = out.glob("*.db")
    db = sqlite3.connect(path)
    audits = dict(db.execute("select label, id from audit where end_ns is not null"))
    assert {"in-backward", "after-backward"} <= set(audits), audits
    for label in ("in-backward", "after-backward"):
        rows = db.execute("select owner_kind, owner, sum(bytes) from ledger where audit_id=? and device='cpu'"
                          " group by owner_kind, owner", (audits[label],)).fetchall()
        unnamed = sum(b for k, _o, b in rows if k == "unattributed")
        saved = {o[len(SAVED_IN):]: b for k, o, b in rows if k == "autograd" and o.startswith(SAVED_IN)}
        assert unnamed == 0, (label, rows)
        if label == "in-backward":  # log_softmax's result, 4 x 31 rows of the 512 logits, float32
            assert saved.get("GPT2LMHeadModel", 0) >= 4 * 31 * 512 * 4, rows
            assert any(k == "autograd" and o == "autograd graph of __main__.out" and b > 0 for k, o, b in rows), rows
        else:
            assert saved == {}, rows
    db.close()
