"""compile_gpt2.py CASE - HF GPT2LMHeadModel (4 layers, SDPA, from a config)
trained a few steps on the CPU with bf16 autocast and AdamW, the way a user
compiles it; prints what dynamo did (its counters, the code of every graph
it made) and the losses, so that a run under tpaudit must print exactly
what a run without it prints (test_compile.py).

CASE: eager (deterministic eager run, no compile), module (torch.compile(model)),
method (model.compile()), forward (torch.compile(model.forward)), optimizer
(eager model, a compiled optimizer step), train_step (one torch.compile(fn)
over forward, backward, optimizer step and zero_grad: no eager module call),
traced_step (the same over an MLP dynamo traces whole, the gradients cleared
with `p.grad = None`: no eager call but loss.backward()),
autotune (torch.compile(model,
mode="max-autotune-no-cudagraphs")), export (torch.export.export of the model).
A case the torch lacks prints "skip: <why>" and exits 0."""
import hashlib
import json
import sys
import warnings

import torch
from torch._dynamo.utils import counters
from transformers import GPT2Config, GPT2LMHeadModel

import compile_ways  # beside this file

STEPS = 4
graphs = []


def backend(gm, inputs):
    """Inductor, after keeping the code of the graph dynamo made."""
    from torch._inductor.compile_fx import compile_fx
    graphs.append(gm.code)
    return compile_fx(gm, inputs)


def build():
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=512, n_positions=64, n_embd=64, n_layer=4, n_head=4)
    model = GPT2LMHeadModel(config)
    try:  # transformers >= 4.36
        model.config._attn_implementation = "sdpa"
    except AttributeError:
        pass
    model.train()
    return model


def compiled(case, model):
    if case in compile_ways.WAYS:
        return compile_ways.compiled(model, case, backend)
    if case == "autotune":
        return torch.compile(model, mode="max-autotune-no-cudagraphs")
    return model


def train(case, model):
    run = compiled(case, model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    step = torch.compile(opt.step, backend=backend) if case == "optimizer" else opt.step

    def train_step(x):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = run(x, labels=x).loss
        loss.backward()
        step()
        opt.zero_grad(set_to_none=True)
        return loss
    if case == "train_step":
        train_step = torch.compile(train_step, backend=backend)
    g = torch.Generator().manual_seed(1)
    losses = []
    for _ in range(STEPS):
        x = torch.randint(0, 512, (2, 32), generator=g)
        losses.append(train_step(x).item().hex())
    return losses


def traced_step():
    """One torch.compile(fn) over forward, backward and step of a model
    dynamo traces whole (an MLP: no graph break in its forward), the
    gradients cleared with `p.grad = None`: the loop's one eager call is
    loss.backward()."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 64))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)

    def train_step(x):
        loss = model(x).square().mean()
        loss.backward()
        opt.step()
        for p in model.parameters():
            p.grad = None
        return loss
    train_step = torch.compile(train_step, backend=backend)
    g = torch.Generator().manual_seed(1)
    return [train_step(torch.randn(32, 64, generator=g)).item().hex() for _ in range(STEPS)]


class Logits(torch.nn.Module):
    """The model as export takes it: token ids in, logits out (no cache)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, ids):
        return self.model(ids, use_cache=False).logits


def export(model):
    """Digests of the graph torch.export makes, strict (through dynamo) and,
    where the torch has it, non-strict."""
    x = torch.randint(0, 512, (2, 32))
    digests = []
    for strict in (True, False):
        try:
            program = torch.export.export(Logits(model), (x,), strict=strict)
        except TypeError:  # torch 2.2: strict only, no keyword
            if not strict:
                continue
            program = torch.export.export(Logits(model), (x,))
        digests.append(hashlib.sha256(str(program.graph_module.code).encode()).hexdigest()[:16])
    return " ".join(digests)


def main():
    case = sys.argv[1]
    if case == "method" and not hasattr(torch.nn.Module, "compile"):
        print("skip: torch %s has no Module.compile" % torch.__version__)
        return 0
    if case == "eager":
        torch.use_deterministic_algorithms(True)
    warnings.simplefilter("default")
    if case == "traced_step":
        losses = traced_step()
    else:
        model = build()
        if case == "export":
            print("export", export(model))
            return 0
        losses = train(case, model)
    seen = {k: dict(v) for k, v in counters.items()
            if k in ("stats", "frames", "graph_break", "recompiles", "unimplemented")}
    print("counters", json.dumps(seen, sort_keys=True))
    print("graphs", len(graphs), hashlib.sha256(json.dumps(graphs).encode()).hexdigest()[:16])
    print("losses", " ".join(losses))
    return 0


if __name__ == "__main__":
    sys.exit(main())
