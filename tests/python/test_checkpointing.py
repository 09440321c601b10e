"""Activation checkpointing under the probe, on the CPU: HF GPT-2 of 4
layers with model.gradient_checkpointing_enable() (non-reentrant, as
transformers 5 gives it by default; asked for explicitly, as 4.36 defaults
to reentrant) and a model of 4 numbered blocks each run through
torch.utils.checkpoint.checkpoint(use_reentrant=False), each against its
twin without checkpointing, and each with the reentrant checkpoint too.  Three audits a step: after
forward, inside the last block's backward (as the gradient reaches its
attention's output: the block's region recomputed, its MLP's backward
done), and after backward.

The probe must never unpack a saved tensor through the program's
saved-tensor hooks (python/tpaudit/_saved_hooks.py): a checkpoint's unpack
hook recomputes its region and lets each tensor be unpacked once per
backward, so before the fix the program's own backward failed
(CheckpointError) after an audit inside it.  With checkpointing the
program ends as its twin does, with the same loss; after forward the step
keeps far fewer saved bytes (no block's activations: only the regions'
inputs); inside the last block's backward its recomputed activations are
charged to the block's modules (its attention's to transformer.h.3.attn),
counted in backward, near the twin's bytes there, and the blocks not yet
recomputed hold nothing (where PyTorch can tell a hooked saved tensor:
2.11; on 2.6 and before the probe reads no saved tensor while a
checkpoint lives, so only the program's own run is checked there: on every
release of the torch matrix the checkpointed program's exit status, stdout
and stderr are those it has without the probe).  Two references: the twin
without checkpointing, and, on 2.11, MemTracker run on the same step first
(torch.distributed._tools.mem_tracker: its figure for the recomputation,
Post-Forward-AC less Pre-Forward-AC): the last block's ln_1 and attention
as recomputed hold within 5% of its bytes (ANALYZER.md, "Activations by
module")."""
import collections
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import torch

LIB = os.environ["TPAUDIT_TEST_LIB"]
TPAUDIT = str(Path(LIB).parents[1] / "bin" / "tpaudit")
SAVED_IN = "saved for backward in "  # TPAUDIT_SAVED_IN of include/tpaudit.h, as a report reads it
KiB, MiB = 1 << 10, 1 << 20
tells_hooks = pytest.mark.skipif(not hasattr(torch._C._autograd.SavedTensor, "unpack_hook"),
                                 reason="this PyTorch cannot tell a hooked saved tensor (SavedTensor.unpack_hook)")

STEP = """
import json, sys
import torch
import torch.utils.checkpoint
torch.manual_seed(0)
kind, mode = sys.argv[1], sys.argv[2]  # mode: off, on (non-reentrant) or reentrant
if sys.argv[3:] == ["bare"]:  # the program without the probe: no audit (tpaudit.audit would load the shim)
    audit = lambda label: None
else:
    from tpaudit import audit
checkpointed, reentrant = mode != "off", mode == "reentrant"
if kind == "gpt2":
    from transformers import GPT2Config, GPT2LMHeadModel
    model = GPT2LMHeadModel(GPT2Config(n_layer=4, n_head=4, n_embd=128, vocab_size=512, n_positions=128,
                                       resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0))
    if checkpointed:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": reentrant})
    last_attn = model.transformer.h[3].attn
    loss_of = lambda x: model(x, labels=x).loss
else:
    class Block(torch.nn.Module):
        def __init__(self, width):
            super().__init__()
            self.ln_1 = torch.nn.LayerNorm(width)
            self.attn = torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.Tanh(),
                                            torch.nn.Linear(width, width))
            self.ln_2 = torch.nn.LayerNorm(width)
            self.mlp = torch.nn.Sequential(torch.nn.Linear(width, 4 * width), torch.nn.GELU(),
                                           torch.nn.Linear(4 * width, width))

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Embedding(512, 128)
            self.h = torch.nn.ModuleList(Block(128) for _ in range(4))
            self.lm_head = torch.nn.Linear(128, 512)

        def forward(self, x):
            x = self.embed(x)
            for block in self.h:
                x = torch.utils.checkpoint.checkpoint(block, x, use_reentrant=reentrant) if checkpointed else block(x)
            return self.lm_head(x)

    model = Model()
    last_attn = model.h[3].attn
    loss_of = lambda x: torch.nn.functional.cross_entropy(model(x).flatten(0, 1), x.flatten())
model.train()
x = torch.randint(0, 512, (8, 64))
tracked = None  # MemTracker's bytes of the last block's ln_1 and attention as backward recomputes them
if sys.argv[3:4] == ["memtracker"]:  # one step under MemTracker first (no optimizer: the weights stay)
    from torch.distributed._tools.mem_tracker import MemTracker, _MemRefType, _ModState
    tracker = MemTracker()
    tracker.track_external(model)
    with tracker:
        loss_of(x).backward()
    tracked = 0
    for stats in tracker.memory_tracking.values():
        if stats.mod_fqn.partition(".")[2] in (sys.argv[4] + ".ln_1", sys.argv[4] + ".attn"):
            before, after = (stats.snapshots[s][0].get(x.device, {}).get(_MemRefType.ACT, 0)
                             for s in (_ModState.PRE_FW_AC, _ModState.POST_FW_AC))
            # less the attention's output, which only the residual add uses (an add saves nothing)
            tracked += after - before - (stats.output_mem if stats.mod_fqn.endswith(".attn") else 0)
    model.zero_grad(set_to_none=True)
    del tracker
hooked = []


def audit_in_block(grad):
    audit(label="in-block-backward")


def on_attn(module, args, out):
    out = out[0] if isinstance(out, tuple) else out
    if not hooked and out.requires_grad:  # the first forward's output (the reentrant's runs without grad: its
        hooked.append(1)                  # recomputation's, inside backward)
        out.register_hook(audit_in_block)


last_attn.register_forward_hook(on_attn)
step = [loss_of(x)]  # no variable names the loss while backward runs: the step's own graph
audit(label="after-forward")
value = step[0].item()
step.pop().backward()
audit(label="after-backward")
print(json.dumps([value, tracked]))
"""
BLOCK_INPUT = 8 * 64 * 128 * 4  # a block's input: batch x sequence x width, float32
MODELS = {"gpt2": "transformer.h", "blocks": "h"}  # the model -> the prefix of its numbered blocks


@pytest.fixture(scope="module")
def steps(tmp_path_factory):
    """(model, "on"|"off") -> (its printed loss, {audit label: {module: saved bytes}}, {label: autograd and
    unattributed bytes}), each step run once under `tpaudit run`."""
    done = {}

    def step(kind, checkpointed):
        if (kind, checkpointed) not in done:
            tmp_path = tmp_path_factory.mktemp("%s-%s" % (kind, checkpointed))
            script = tmp_path / "step.py"
            script.write_text(STEP)
            out = tmp_path / "out"
            tracker = ["memtracker", MODELS[kind] + ".3"] if checkpointed == "on" else []
            r = subprocess.run([TPAUDIT, "run", "-o", str(out), "--", sys.executable, str(script), kind, checkpointed,
                                *tracker],
                               capture_output=True, text=True, timeout=600, env=dict(os.environ, HF_HUB_OFFLINE="1"))
            assert r.returncode == 0, r.stdout + r.stderr
            (path,) = out.glob("*.db")
            db = sqlite3.connect(path)
            audits = dict(db.execute("select label, id from audit where end_ns is not null"))
            assert set(audits) == {"after-forward", "in-block-backward", "after-backward"}, audits
            saved, step_bytes = {}, {}
            for label, audit in audits.items():
                rows = db.execute("select owner_kind, owner, sum(bytes) from ledger where audit_id=? and"
                                  " owner_kind in ('autograd', 'unattributed') group by owner_kind, owner", (audit,))
                rows = rows.fetchall()
                saved[label] = {o[len(SAVED_IN):]: b for _, o, b in rows if o and o.startswith(SAVED_IN)}
                step_bytes[label] = sum(b for _, _, b in rows)
            db.close()
            loss, tracked = json.loads(r.stdout.strip().splitlines()[-1])
            done[kind, checkpointed] = loss, saved, step_bytes, tracked
        return done[kind, checkpointed]
    return step


def rolled_up(by_module, module):
    return sum(b for name, b in by_module.items() if name == module or name.startswith(module + "."))


@tells_hooks
@pytest.mark.parametrize("kind", sorted(MODELS))
def test_checkpointed_step_runs_as_its_twin_and_saves_little_in_forward(steps, kind):
    """The program's backward completes under the probe, audited inside
    it, with the twin's loss; after forward the checkpointed step keeps
    under a quarter of the bytes the twin's graph saved (the loss is kept
    in a list there: its graph is named by it, so the audit's bytes are
    compared whole), and after backward neither keeps anything saved."""
    loss, saved, step_bytes, _ = steps(kind, "on")
    twin_loss, twin_saved, twin_bytes, _ = steps(kind, "off")
    assert loss == pytest.approx(twin_loss, rel=1e-5)
    assert twin_bytes["after-forward"] > 4 * MiB, twin_bytes
    assert 0 < step_bytes["after-forward"] < twin_bytes["after-forward"] / 4, (step_bytes, twin_bytes)
    assert saved["after-backward"] == {} and twin_saved["after-backward"] == {}


@tells_hooks
@pytest.mark.parametrize("kind", sorted(MODELS))
def test_recomputed_activations_are_the_recomputing_modules_in_backward(steps, kind):
    """Inside the last block's backward (its MLP's backward done, its
    region recomputed): its ln_1 and attention within 5% of MemTracker's
    recomputation of them; the block holds within 25% of the twin's bytes
    there (the twin keeps them from forward), plus at most the block's
    input (the region's input, saved again by its recomputation, has no
    graph: it counts with the block's module that saved it, where the
    twin's counts with block 2, which made it), its attention's share charged
    to the attention; the blocks before it, not recomputed yet, hold under
    1 KiB each where the twin's hold their whole forward."""
    _, saved, _, tracked = steps(kind, "on")
    _, twin_saved, _, _ = steps(kind, "off")
    blocks = MODELS[kind]
    during, twin_during = saved["in-block-backward"], twin_saved["in-block-backward"]
    got, want = rolled_up(during, blocks + ".3"), rolled_up(twin_during, blocks + ".3")
    assert want > 256 * KiB and 0.75 * want <= got <= 1.05 * want + BLOCK_INPUT, (got, want, during, twin_during)
    assert rolled_up(during, blocks + ".3.attn") > 256 * KiB, during
    # side by side with MemTracker's recomputation (its Pre- and Post-Forward-AC snapshots) of the same step:
    # ln_1 and the attention, less the region's input that ln_1's recomputation saves again (MemTracker counts it
    # before the region: the checkpoint keeps it)
    region = rolled_up(during, blocks + ".3.ln_1") + rolled_up(during, blocks + ".3.attn") - BLOCK_INPUT
    assert tracked > 256 * KiB and abs(region - tracked) <= 0.05 * tracked, (region, tracked, during)
    assert rolled_up(during, blocks + ".3.mlp") < KiB, during  # its backward ran: what it saved is freed
    for i in range(3):
        block = "%s.%d" % (blocks, i)
        assert rolled_up(during, block) < KiB and rolled_up(twin_during, block) > 256 * KiB, (block, during)


PROGRAM_LINES = 8  # at most this many trailing lines of a differing output are shown


def differing(name, got, want):
    return "%s differs from the program's own:\n%s\n--- without the probe:\n%s" % (
        name, "\n".join(got.splitlines()[-PROGRAM_LINES:]), "\n".join(want.splitlines()[-PROGRAM_LINES:]))


@pytest.mark.parametrize("mode", ["on", "reentrant"])
@pytest.mark.parametrize("kind", sorted(MODELS))
def test_checkpointed_program_runs_as_without_the_probe(tmp_path, kind, mode):
    """On every torch of the matrix (2.2, 2.6, 2.11), a checkpointed step
    audited after forward, inside the last block's backward and after
    backward ends under `tpaudit run` as it does without the probe: the same
    exit status, stdout (its loss) and stderr (less the probe's own
    `tpaudit:` lines), and each of the three audits was taken (on 2.6 and
    before, with the non-reentrant checkpoint's state live, the first two
    tell no saved tensor by module).  Before the
    probe stopped reading saved tensors while a checkpoint lives on torch
    2.6 and before, the non-reentrant step's backward failed there
    (CheckpointError) after the audit inside it."""
    script = tmp_path / "step.py"
    script.write_text(STEP)
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    want = subprocess.run([sys.executable, str(script), kind, mode, "bare"], capture_output=True, text=True,
                          timeout=600, env=env)
    assert want.returncode == 0, want.stderr  # the program itself runs
    out = tmp_path / "out"
    got = subprocess.run([TPAUDIT, "run", "-o", str(out), "--", sys.executable, str(script), kind, mode],
                         capture_output=True, text=True, timeout=600, env=env)
    own = "\n".join(line for line in got.stderr.splitlines() if not line.startswith("tpaudit:"))
    assert got.returncode == want.returncode, got.stderr
    assert got.stdout == want.stdout, differing("stdout", got.stdout, want.stdout)
    assert own == want.stderr.rstrip("\n"), differing("stderr", own, want.stderr)
    (path,) = out.glob("*.db")
    db = sqlite3.connect(path)
    labels = sorted(label for (label,) in db.execute("select label from audit where end_ns is not null"))
    told = dict(db.execute("select a.label, count(l.owner) from audit a left join ledger l on l.audit_id = a.id"
                           " and l.owner like ? group by a.id", (SAVED_IN + "%",)))
    db.close()
    assert labels == ["after-backward", "after-forward", "in-block-backward"], labels
    if mode == "on" and not hasattr(torch._C._autograd.SavedTensor, "unpack_hook"):
        # a checkpoint lives in both and this torch cannot tell its saved tensors: none read, none guessed
        assert told["after-forward"] == told["in-block-backward"] == 0, told


@pytest.mark.parametrize("kind", sorted(MODELS))
def test_reentrant_recomputation_is_told_by_module(tmp_path, kind):
    """The reentrant checkpoint recomputes a block's forward inside its
    backward and keeps that graph in torch's own locals (checkpoint.py's
    `outputs_with_grad`): inside the last block's backward the recomputed
    graph's saved bytes are told by the block's modules that made them
    (the ledger's path), over 256 KiB under the last block, its attention
    among them, and none under the blocks not recomputed yet."""
    script = tmp_path / "step.py"
    script.write_text(STEP)
    out = tmp_path / "out"
    r = subprocess.run([TPAUDIT, "run", "-o", str(out), "--", sys.executable, str(script), kind, "reentrant"],
                       capture_output=True, text=True, timeout=600, env=dict(os.environ, HF_HUB_OFFLINE="1"))
    assert r.returncode == 0, r.stdout + r.stderr
    (path,) = out.glob("*.db")
    db = sqlite3.connect(path)
    rows = db.execute("select l.owner, l.path, l.bytes from ledger l join audit a on a.id = l.audit_id"
                      " where a.label = 'in-block-backward' and a.end_ns is not null and l.owner_kind = 'autograd'"
                      " and l.path like ?", (SAVED_IN + "%",)).fetchall()
    db.close()
    by_module = collections.Counter()
    for owner, where, nbytes in rows:
        by_module[where[len(SAVED_IN):]] += nbytes
    blocks = MODELS[kind]
    assert rolled_up(by_module, blocks + ".3") > 256 * KiB, rows
    assert rolled_up(by_module, blocks + ".3.attn") > 0, rows
    assert any(owner.endswith("outputs_with_grad") for owner, _, _ in rows), rows  # the recomputed graph's holder
    for i in range(3):
        assert rolled_up(by_module, "%s.%d" % (blocks, i)) == 0, (i, rows)
