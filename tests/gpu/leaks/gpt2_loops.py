"""GPT-2 loops on one GPU as a new user writes them (issue 49): at module
level, with the loop's global `out` binding the newest output, and eval
loops that never call an optimizer; each beside a bounded twin.

    python gpt2_loops.py CASE [--twin] [--steps 10] [--layers 12] [--batch 4] [--seq 256]

  module         a module-level training loop keeping each step's `out.logits` in `kept`;
                 twin: keeps `out.logits.argmax(-1).cpu()`
  eval           a module-level loop under no_grad, no optimizer at all, keeping each batch's logits;
                 twin: keeps the last 6 in a deque (it rises, so growth audits come, then stays flat)
  eval_function  the same eval loop inside a function
  generate       a function's loop of `model.generate` calls (16 new tokens, greedy), keeping
                 each call's output with its per-token logits and KV cache; only transformers
                 calls the model; twin: keeps the last 6 outputs in a deque

The eval loop asks for no KV cache (use_cache=False, as a perplexity
evaluation does): its `out`, dropped after the loop, then holds only what
`kept` holds, so the samples before and after the drop differ by what the
loop kept.  The model is HF GPT2LMHeadModel from GPT2Config (n_layer=--layers; 12 is GPT-2
124M), fp32.  After each step (training: at its optimizer step pre-hook, where
tpaudit samples; eval: after each batch, the moment tpaudit samples at the
next model call) it prints `alloc <step> <memory_allocated()> <memory_reserved()>`,
and after the loop, its `out` dropped (and the twin's deque emptied),
`alloc_end ...`, for tests/gpu/leaks/judge.py.  Nothing here calls tpaudit.
"""
import collections

import torch
from torch.optim.optimizer import register_optimizer_step_pre_hook

from gpt2_run import alloc, arguments, finish, model_and_batch  # beside this file

args = arguments(["module", "eval", "eval_function", "generate"], steps=10)
model, x = model_and_batch(args)
kept = collections.deque(maxlen=6) if args.twin and args.case != "module" else []


def eval_function(steps):
    with torch.no_grad():
        for step in range(1, steps + 1):
            logits = model(input_ids=x).logits  # made:eval_function
            kept.append(logits)
            alloc(step)


GENERATE = dict(max_new_tokens=16, min_new_tokens=16, do_sample=False, pad_token_id=0,
                return_dict_in_generate=True, output_logits=True)


def generate(steps):
    with torch.no_grad():
        for step in range(1, steps + 1):
            kept.append(model.generate(x, **GENERATE))  # made:generate
            alloc(step)


if args.case == "module":
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    register_optimizer_step_pre_hook(lambda optimizer, *_: alloc(len(kept)))
    for step in range(1, args.steps + 1):
        out = model(input_ids=x, labels=x)  # made:module
        kept.append(out.logits.argmax(-1).cpu() if args.twin else out.logits)
        out.loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    del out
elif args.case == "eval":
    model.eval()
    with torch.no_grad():
        for step in range(1, args.steps + 1):
            out = model(input_ids=x, use_cache=False)  # made:eval
            kept.append(out.logits)
            alloc(step)
    del out
elif args.case == "generate":
    model.eval()
    generate(args.steps)
else:
    model.eval()
    eval_function(args.steps)
if args.twin:
    kept.clear()
finish(args)
