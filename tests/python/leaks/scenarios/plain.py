"""Plain-torch training loops on the CPU that keep memory step over step (the
leaks) and loops that keep memory in a bounded way (the twins).

    python plain.py CASE [--steps N]

Leaks (each keeps one logits-sized tensor, or more, per optimizer step):
  kept          a module-global list keeps each step's logits with their graph
  hook          a forward hook appends the head's output to a list in its closure
  total_loss    `total_loss += loss` with backward(retain_graph=True): the graph of every step stays
  history       a Trainer-like object keeps each step's logits in `self.history`
  lru_cache     a functools.lru_cache keyed by step keeps each step's logits
  generator     a generator keeps each step's logits in a local list of its frame
  kept_output   the loop's local `out` (a dict, as a model's output) holds the step's logits, which a
                module-global list also keeps (the list is their holder, the newest included)
  kept_and_stale  `kept`, and the head replaced after the optimizer was built (a stale_param too)
Twins (no growth after warm-up):
  argmax        keeps `loss.detach().cpu()` and `logits.argmax(-1).cpu()` only
  deque         keeps logits with graph in a deque(maxlen=3)
  cleared       a cache of logits that is cleared every 3 steps
  accumulation  gradient accumulation over 4 micro-batches per step
  eval          an eval every 4 steps under no_grad whose outputs are dropped after it
  ema           an EMA copy of the model updated every step
  warmup        AdamW state made at step 1 and a first eval kept once

The model is an embedding and two linear layers; its logits are
BATCH x SEQ x VOCAB float32 (LOGITS_BYTES).  The tests find the lines that
make the kept tensors by the `# made:` markers below.  Nothing here calls
tpaudit: audits come from the optimizer step hook, as in an unmodified program.
"""
import argparse
import collections
import copy
import functools
import itertools

import torch
from torch import nn
from torch.nn import functional as F

BATCH, SEQ, VOCAB, EMBED, HIDDEN = 4, 16, 1024, 64, 256
LOGITS_BYTES = BATCH * SEQ * VOCAB * 4
HIDDEN_BYTES = BATCH * SEQ * HIDDEN * 4
# What one step's graph saves for backward: cross_entropy's log_softmax
# (logits-sized), GELU's input and the head's input (hidden-sized each), the
# first Linear's input (the embedding's output), the tokens the embedding
# looked up (int64) and the loss's scalar.
GRAPH_BYTES = LOGITS_BYTES + 2 * HIDDEN_BYTES + BATCH * SEQ * EMBED * 4 + BATCH * SEQ * 8 + 4


def make_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Embedding(VOCAB, EMBED), nn.Linear(EMBED, HIDDEN), nn.GELU(), nn.Linear(HIDDEN, VOCAB))


def tokens(step):
    return torch.randint(0, VOCAB, (BATCH, SEQ), generator=torch.Generator().manual_seed(step))


def forward(model, step):
    x = tokens(step)
    logits = model(x)  # made:logits
    loss = F.cross_entropy(logits.flatten(0, 1), x.flatten())  # made:loss
    return logits, loss


def train(model, steps, keep=lambda step, logits, loss: None, retain_graph=False, opt=None):
    opt = opt or torch.optim.AdamW(model.parameters(), lr=1e-3)
    for step in range(1, steps + 1):
        logits, loss = forward(model, step)
        keep(step, logits, loss)
        loss.backward(retain_graph=retain_graph)
        opt.step()
        opt.zero_grad(set_to_none=True)
    return opt


kept = []


def case_kept(steps):
    def keep(step, logits, loss):
        kept.append(logits)  # "for metrics later"
    train(make_model(), steps, keep)


kept_logits = []


def case_kept_output(steps):
    model = make_model()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for step in range(1, steps + 1):
        out = dict(zip(("logits", "loss"), forward(model, step)))
        kept_logits.append(out["logits"])
        out["loss"].backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def case_kept_and_stale(steps):
    model = make_model()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model[3] = nn.Linear(HIDDEN, VOCAB)  # the head replaced after the optimizer was built: stale
    train(model, steps, lambda step, logits, loss: kept.append(logits), opt=opt)


def attach_keeper(layer):
    acts = []

    def keep_activation(module, inputs, output):
        acts.append(output)
    layer.register_forward_hook(keep_activation)


def case_hook(steps):
    model = make_model()
    attach_keeper(model[1])
    train(model, steps)


total_loss = 0


def case_total_loss(steps):
    def keep(step, logits, loss):
        global total_loss
        total_loss += loss  # made:total_loss
    train(make_model(), steps, keep, retain_graph=True)


class Trainer:
    def __init__(self, model):
        self.model = model
        self.history = []

    def fit(self, steps):
        train(self.model, steps, lambda step, logits, loss: self.history.append(logits))


def case_history(steps):
    trainer = Trainer(make_model())
    trainer.fit(steps)


def case_lru_cache(steps):
    model = make_model()

    @functools.lru_cache(maxsize=None)
    def step_outputs(step):
        return forward(model, step)

    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for step in range(1, steps + 1):
        _, loss = step_outputs(step)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def batches(model):
    seen = []
    for step in itertools.count(1):
        logits, loss = forward(model, step)
        seen.append(logits)
        yield loss


def case_generator(steps):
    model = make_model()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    stream = batches(model)
    for _, loss in zip(range(steps), stream):
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def case_argmax(steps):
    losses, predictions = [], []

    def keep(step, logits, loss):
        losses.append(loss.detach().cpu())
        predictions.append(logits.argmax(-1).cpu())
    train(make_model(), steps, keep)


def case_deque(steps):
    recent = collections.deque(maxlen=3)
    train(make_model(), steps, lambda step, logits, loss: recent.append(logits))


def case_cleared(steps):
    cache = {}

    def keep(step, logits, loss):
        cache[step] = logits
        if step % 3 == 0:
            cache.clear()
    train(make_model(), steps, keep)


def case_accumulation(steps):
    model = make_model()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for step in range(1, steps + 1):
        for micro in range(4):
            _, loss = forward(model, step * 4 + micro)
            (loss / 4).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def evaluate(model):
    with torch.no_grad():
        outputs = [forward(model, 10_000 + i)[0] for i in range(2)]
    return sum(o.float().mean().item() for o in outputs)


def case_eval(steps):
    model = make_model()
    scores = []

    def keep(step, logits, loss):
        if step % 4 == 0:
            scores.append(evaluate(model))
    train(model, steps, keep)


def case_ema(steps):
    model = make_model()
    ema = copy.deepcopy(model).requires_grad_(False)

    def keep(step, logits, loss):
        with torch.no_grad():
            for e, p in zip(ema.parameters(), model.parameters()):
                e.lerp_(p, 0.01)
    train(model, steps, keep)


def case_warmup(steps):
    model = make_model()
    first = {}

    def keep(step, logits, loss):
        if step == 1:
            with torch.no_grad():
                first["eval"] = forward(model, 10_000)[0]
    train(model, steps, keep)


CASES = {name[len("case_"):]: fn for name, fn in globals().items() if name.startswith("case_")}

if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("case", choices=sorted(CASES))
    ap.add_argument("--steps", type=int, default=32)
    args = ap.parse_args()
    CASES[args.case](args.steps)
    print("done", args.case, args.steps)
