"""Host of hostile_probe.py `frames`: with the collector off, a function
holding a tensor of its own calls the optimizer step (the probe's step
audits run while its frame is on the stack) and returns; its tensor must be
freed as it returns, with the probe as without it.  Prints whether it was,
at each step.  A list of the running frames that the probe's holder walk
once kept in a local of its own frame made a reference cycle through that
frame, which kept the caller's frames, and their tensors, alive until the
next collection."""
import gc
import weakref

import torch


def step(opt):
    marker = torch.zeros(4)  # a local only this frame holds
    opt.step()  # the probe's step audits at steps 1 and 2 walk the frames, this one among them
    return weakref.ref(marker)


torch.manual_seed(0)
model = torch.nn.Linear(16, 4)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
batch = torch.randn(8, 16)
gc.disable()
for n in range(1, 4):
    opt.zero_grad()
    model(batch).square().mean().backward()
    marker = step(opt)
    print("step", n, "the frame's tensor freed on return:", marker() is None)
gc.enable()
