"""Loops of HF `generate` calls (issue 49: growth with no optimizer step,
where only transformers calls the model), and their twins.

    python generation.py CASE [--steps N]

Leaks (each call's output, with its per-token logits, kept):
  generate_function  a function's `for` loop keeping each call's output
  generate_while     a module-level `while len(kept) < N` loop: no variable is rebound between calls
Twins:
  generate_long      one call of 20 x N new tokens, its output (which grows token by token) kept
  generate_twin      the function's loop keeping a deque(maxlen=6) of outputs (it rises, then stays flat)

The model is GPT2LMHeadModel from a 2-layer config, greedy, 8 new tokens a
call, each call's output held through the line marked `# made:`.  After the
loop it prints `kept_per_call <bytes>`: the bytes of the distinct tensor
storages one kept output holds (the truth a rate is checked against).
Nothing here calls tpaudit.
"""
import argparse
import collections

import torch
from transformers import GPT2Config, GPT2LMHeadModel

ap = argparse.ArgumentParser()
ap.add_argument("case")
ap.add_argument("--steps", type=int, default=10)
args = ap.parse_args()
STEPS = args.steps
NEW_TOKENS = 8

torch.manual_seed(0)
model = GPT2LMHeadModel(GPT2Config(n_layer=2, n_head=2, n_embd=64, vocab_size=2048, n_positions=512,
                                   bos_token_id=1, eos_token_id=1)).eval()
prompt = torch.randint(0, 2048, (4, 16))
options = dict(do_sample=False, return_dict_in_generate=True, output_logits=True, pad_token_id=1)


def storages(out):
    """Bytes of the distinct storages of the tensors one output holds."""
    seen = {}
    tensors = [out.sequences, *out.logits]
    cache = getattr(out, "past_key_values", None)
    for layer in getattr(cache, "layers", ()) or ():
        tensors += [t for t in (getattr(layer, "keys", None), getattr(layer, "values", None)) if t is not None]
    for t in tensors:
        s = t.untyped_storage()
        seen[s.data_ptr()] = s.nbytes()
    return sum(seen.values())


def generate_loop(steps, kept):
    with torch.no_grad():
        for _ in range(steps):
            kept.append(model.generate(prompt, max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS, **options))  # made:generate_function
    return kept


kept = []
if args.case == "generate_function":
    generate_loop(STEPS, kept)
elif args.case == "generate_while":
    with torch.no_grad():
        while len(kept) < STEPS:
            kept.append(model.generate(prompt, max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS, **options))  # made:generate_while
elif args.case == "generate_long":
    with torch.no_grad():
        long = 20 * STEPS
        kept.append(model.generate(prompt, max_new_tokens=long, min_new_tokens=long, **options))
elif args.case == "generate_twin":
    generate_loop(STEPS, collections.deque(maxlen=6))
else:
    raise SystemExit("unknown case %s" % args.case)
print("kept_per_call", storages(kept[0]) if kept else 0)
print("done", args.case, STEPS)
