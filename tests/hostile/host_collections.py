"""Host of hostile_probe.py `collections`: a program whose unreachable
reference cycles hold tensors (and run __del__ when collected) trains a
model with an optimizer, then runs an eval loop of module calls.  It counts
the collections that start while a frame of tpaudit's probe is on the stack
and prints that count: 0 without the probe, and 0 with it, since the probe
holds the collector off while it works (python/tpaudit/_collector.py).
Before that, the audits' own allocations set collections off inside them,
which ran the program's __del__ in the probe's audit."""
import gc
import os
import sys

import torch

PROBE_PART = os.sep.join(("", "python", "tpaudit", ""))  # the probe's package: <prefix>/share/tpaudit/python/tpaudit
inside_probe = []


def on_collection(phase, _info):
    if phase != "start":
        return
    frame = sys._getframe(1)
    while frame is not None:
        if PROBE_PART in frame.f_code.co_filename:
            inside_probe.append(frame.f_code.co_name + "@" + os.path.basename(frame.f_code.co_filename) + ":" + str(frame.f_lineno))
            return
        frame = frame.f_back


class Cycle:
    def __init__(self):
        self.me = self
        self.tensor = torch.zeros(256)


torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
gc.callbacks.append(on_collection)
for step in range(40):
    Cycle()  # garbage at once: only a collection frees it
    loss = model(torch.randn(8, 16)).square().mean()
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
with torch.no_grad():
    for _ in range(40):
        Cycle()
        model(torch.randn(8, 16))
gc.callbacks.remove(on_collection)
print("collections started inside the probe: %d %s" % (len(inside_probe), sorted(set(inside_probe))))
print("loss %.6f" % loss.item())
