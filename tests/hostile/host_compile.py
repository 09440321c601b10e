"""host_compile.py - torch.compile on the CPU, as a program under pytest's
`filterwarnings = error` runs it (`-W error::UserWarning`): a compiled
module, Module.compile(), a compiled training function, a block with a hook
of its own, and the guards of each compiled frame.  It prints dynamo's
counters (frames, graph breaks, recompiles), a digest of every graph's code
and of every frame's guards, and the losses, so a run under the probe must
print what a run without it prints.  Then a second model is trained by a
compiled function with an optimizer over a first model's parameters: the
probe finds the second model only from the modules that ran forward."""
import hashlib
import json
import os
import sys
from pathlib import Path

import torch
import torch._dynamo as dynamo
from torch import nn
from torch._dynamo.utils import counters

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python" / "scenarios"))
import compile_ways  # noqa: E402  (the compile scenarios' helper)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(16, 16)
        self.n = nn.LayerNorm(16)

    def forward(self, x):
        return self.n(torch.relu(self.a(x))) + x


class Net(nn.Module):
    def __init__(self, hooked=False):
        super().__init__()
        self.blocks = nn.ModuleList([Block() for _ in range(4)])
        self.head = nn.Linear(16, 4)
        if hooked:
            self.blocks[1].register_forward_pre_hook(lambda m, a: None)

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return self.head(x)


graphs, guards = [], []


def backend(gm, _inputs):
    graphs.append(gm.code)
    return gm.forward


def keep_guards(found):
    guards.append(sorted("%s %s" % (g.name, g.create_fn_name()) for g in found))


def digest(items):
    return hashlib.sha256(json.dumps(items, sort_keys=True).encode()).hexdigest()[:16]


def compiled(net, how):
    if how == "guards":
        return dynamo.optimize(backend, guard_export_fn=keep_guards)(net)
    if how == "function":
        return torch.compile(lambda x: net(x), backend=backend)
    return compile_ways.compiled(net, how, backend)


def train(net, run, opt, steps=4):
    losses = []
    for i in range(steps):
        x = torch.randn(8 if i < 2 else 8 + i, 16)  # a new batch size: dynamo's own recompile
        loss = run(x).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(round(loss.item(), 6))
    return losses


def main():
    torch.manual_seed(0)
    for how in ("module", "method", "function", "guards"):
        for hooked in (False, True):
            net = Net(hooked)
            opt = torch.optim.SGD(net.parameters(), lr=0.1)
            print(how, hooked, train(net, compiled(net, how), opt))
    first = Net()
    opt = torch.optim.SGD(first.parameters(), lr=0.1)
    second = Net()
    train(second, torch.compile(lambda x: second(x), backend=backend), opt)
    seen = {k: dict(v) for k, v in counters.items() if k in ("stats", "graph_break", "recompiles", "frames")}
    print("counters", json.dumps(seen, sort_keys=True))
    print("graphs", len(graphs), digest(graphs))
    print("guards", len(guards), [len(g) for g in guards], digest(guards))
    print("second model parameters", sum(1 for _ in second.parameters()))
    keys = os.environ.get("HOST_COMPILE_KEYS")
    if keys:  # outside the working directory: the run's files stay the same
        with open(keys, "w") as f:
            json.dump([id(p) for p in second.parameters()], f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
