"""Activations saved for backward by the module whose forward made them
(python/tpaudit/_made_by.py), side by side with PyTorch's own
torch.distributed._tools.mem_tracker.MemTracker on the CPU: HF GPT-2 and
HF LlamaForCausalLM, 4 layers each, built from small configs.  One
training step runs under MemTracker, then the same step (same model, same
batch) under `tpaudit run` with an audit inside backward, as the logits'
gradient arrives, before any block's backward frees what it saved.

Like for like: MemTracker's activation bytes of a module are those its
forward made that are still alive when it returns (its Post-Forward
snapshot's Activation minus its Pre-Forward one); they include the
module's output, which for attention and the MLP only a residual add uses
(an add saves nothing), so their figure is taken less the output
(MemTracker's own output_mem).  A block's output is saved by the next
block's norm (or the final norm), so a block's figure is MemTracker's as
it is.  Each block's attention and MLP, and each block, must match within
5% (ANALYZER.md, "Activations by module")."""
import json
import os
from pathlib import Path

import pytest

import audit_in_backward

LIB = os.environ["TPAUDIT_TEST_LIB"]
BUILD = Path(LIB).parents[1]
TPAUDIT = str(BUILD / "bin" / "tpaudit")
SAVED_IN = "saved for backward in "  # TPAUDIT_SAVED_IN of include/tpaudit.h, as a report reads it
LAYERS = 4
WITHIN = 0.05

STEP = """
import json, sys
import torch
from torch.distributed._tools.mem_tracker import MemTracker, _MemRefType, _ModState
import tpaudit
torch.manual_seed(0)
if sys.argv[1] == "gpt2":
    from transformers import GPT2Config, GPT2LMHeadModel
    model = GPT2LMHeadModel(GPT2Config(n_layer=%(layers)d, n_head=4, n_embd=128, vocab_size=512, n_positions=128,
                                       resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0))
else:
    from transformers import LlamaConfig, LlamaForCausalLM
    model = LlamaForCausalLM(LlamaConfig(num_hidden_layers=%(layers)d, hidden_size=128, intermediate_size=352,
                                         num_attention_heads=4, num_key_value_heads=2, vocab_size=512,
                                         max_position_embeddings=128))
model.train()
x = torch.randint(0, 512, (8, 64))

tracker = MemTracker()
tracker.track_external(model)
with tracker:
    model(x, labels=x).loss.backward()
cpu = torch.device("cpu")
tracked = {}
for stats in tracker.memory_tracking.values():
    before, after = (stats.snapshots[s][0].get(cpu, {}).get(_MemRefType.ACT, 0)
                     for s in (_ModState.PRE_FW, _ModState.POST_FW))
    tracked[stats.mod_fqn.partition(".")[2]] = {"activations": after - before, "output": stats.output_mem}
del tracker
model.zero_grad(set_to_none=True)
""" % {"layers": LAYERS} + audit_in_backward.STEP + """
print(json.dumps(tracked))
"""

MODELS = {  # the blocks, their attention and their MLP, as each model names them
    "gpt2": ("transformer.h.%d", "attn", "mlp"),
    "llama": ("model.layers.%d", "self_attn", "mlp"),
}


def run_step(tmp_path, model):
    stdout, db, audits = audit_in_backward.run(TPAUDIT, tmp_path, STEP, model)
    tracked = json.loads(stdout.strip().splitlines()[-1])

    def saved(label):
        rows = db.execute("select owner, sum(bytes) from ledger where audit_id=? and owner_kind='autograd'"
                          " and device='cpu' and owner like ? group by owner", (audits[label], SAVED_IN + "%"))
        return {owner[len(SAVED_IN):]: b for owner, b in rows}

    found = saved("in-backward"), saved("after-backward")
    db.close()
    return tracked, found


@pytest.mark.parametrize("model", sorted(MODELS))
def test_activations_by_module_match_memtracker(tmp_path, model):
    """Inside backward, each block's attention and MLP (MemTracker's figure
    less the output no one saved) and each block (MemTracker's figure)
    hold within 5% of MemTracker's; the rows keep the deepest module that
    made the bytes (an MLP's first projection has a row of its own), and
    the twin audit after backward finds nothing saved."""
    tracked, (during, after) = run_step(tmp_path, model)
    block, attn, mlp = MODELS[model]
    for i in range(LAYERS):
        name = block % i
        pairs = [(name, tracked[name]["activations"])]
        for part in (attn, mlp):
            mod = "%s.%s" % (name, part)
            pairs.append((mod, tracked[mod]["activations"] - tracked[mod]["output"]))
        for mod, want in pairs:
            got = audit_in_backward.rolled_up(during, mod)
            assert want > 0 and abs(got - want) <= WITHIN * want, (mod, got, want, during)
    deeper = [name for name in during if name.startswith(block % 0 + ".%s." % mlp)]
    assert deeper, during
    assert after == {}, after
