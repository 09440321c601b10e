"""Loops that keep each step's logits wherever the loop lives, written as a
new user writes them (issue 49), and their bounded twins.

    python loops.py CASE [--steps N]

Training loops (an optimizer step each iteration):
  module_for    a module-level `for` loop; its global `out` also binds the newest logits
  module_while  a module-level `while` loop
  attribute     a function's loop whose newest logits are also an attribute (`state.last`)
Loops with no optimizer at all (eval, inference):
  eval_module   a module-level loop under no_grad keeping each batch's logits
  eval_function the same inside a function
  train_then_eval  a module-level training loop that keeps nothing, then an eval loop of twice as
                many batches keeping each batch's logits
Twins (nothing kept beyond a bound):
  module_twin   the module-level `for` loop keeping `logits.argmax(-1)` only
  eval_twin     the function's eval loop keeping a deque(maxlen=6) of logits (growth audits, then flat)

Each leak keeps one LOGITS_BYTES tensor a step, made on the `# made:` line
of this file.  Nothing here calls tpaudit.
"""
import argparse
import collections
import types

import torch
from torch.nn import functional as F

from plain import make_model, tokens

ap = argparse.ArgumentParser()
ap.add_argument("case")
ap.add_argument("--steps", type=int, default=10)
args = ap.parse_args()
STEPS = args.steps


def eval_function(steps, kept):
    model = make_model().eval()
    with torch.no_grad():
        for step in range(1, steps + 1):
            logits = model(tokens(step))  # made:eval_function
            kept.append(logits)


def attribute_loop(steps):
    model = make_model()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    state = types.SimpleNamespace(last=None, seen=[])
    for step in range(1, steps + 1):
        x = tokens(step)
        state.last = model(x)  # made:attribute
        state.seen.append(state.last)
        F.cross_entropy(state.last.flatten(0, 1), x.flatten()).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


kept = []
if args.case in ("module_for", "module_twin"):
    model = make_model()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for step in range(1, STEPS + 1):
        x = tokens(step)
        out = model(x)  # made:module_for
        loss = F.cross_entropy(out.flatten(0, 1), x.flatten())
        kept.append(out if args.case == "module_for" else out.argmax(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
elif args.case == "module_while":
    model = make_model()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    step = 0
    while step < STEPS:
        step += 1
        x = tokens(step)
        out = model(x)  # made:module_while
        kept.append(out)
        F.cross_entropy(out.flatten(0, 1), x.flatten()).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
elif args.case == "attribute":
    attribute_loop(STEPS)
elif args.case == "eval_module":
    model = make_model().eval()
    with torch.no_grad():
        for step in range(1, STEPS + 1):
            out = model(tokens(step))  # made:eval_module
            kept.append(out)
elif args.case == "train_then_eval":
    model = make_model()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for step in range(1, STEPS + 1):
        x = tokens(step)
        F.cross_entropy(model(x).flatten(0, 1), x.flatten()).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    with torch.no_grad():
        for step in range(1, 2 * STEPS + 1):
            logits = model(tokens(step))  # made:train_then_eval
            kept.append(logits)
elif args.case == "eval_function":
    eval_function(STEPS, kept)
elif args.case == "eval_twin":
    eval_function(STEPS, collections.deque(maxlen=6))
else:
    raise SystemExit("unknown case %s" % args.case)
print("done", args.case, STEPS)
