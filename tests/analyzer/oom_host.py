"""A training program that runs out of device memory, on the CPU: the
probe's out-of-memory observer (tpaudit._oom.on_oom) is called with the
arguments PyTorch's caching allocator gives it (device, bytes asked, the
device's total - or the process's cap - and its free bytes), from inside the
step, while real torch CPU tensors stand in for the step's, and then the
program raises torch.OutOfMemoryError as the allocator would.  Run under the
shim (tpaudit run -- python oom_host.py CASE); without the probe it trains and
raises the same.

cases: growth (a list keeps each step's logits until the OOM), peak (one
step's batch is too large), fragmentation (the allocator's free bytes are in
no one block), other (another process holds the device), caught (a
batch-size finder halves the batch and goes on), clean (no OOM), ranks (two
ranks, rank 1 dies of a growth OOM), killed (SIGKILL after its steps, as the
kernel's OOM killer ends a process out of host memory)."""
import os
import signal
import subprocess
import sys

import torch

GIB = 1 << 30
MIB = 1 << 20


def observer():
    """The probe's observer when the probe runs in this process, else None."""
    mod = sys.modules.get("tpaudit._oom")
    return mod if mod is not None and mod.watch.recorder is not None else None


def out_of_memory(asked, total, free, allocator=None):
    """What the caching allocator does when it cannot allocate: its observers,
    then the error."""
    mod = observer()
    if mod is not None:
        if allocator is not None:
            mod.allocator_state = lambda _torch, _device: allocator
        mod.on_oom(0, asked, total, free, frame=sys._getframe(1))
    raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate %.2f GiB." % (asked / GIB))


CAP = dict(total=2 * GIB, free=64 * GIB)  # set_per_process_memory_fraction: the cap is hit first


def train(case, steps):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 64))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    kept = []
    batch = 64
    step = 0
    while step < steps:
        x = torch.randn(batch, 64)
        hidden = model[1](model[0](x))  # saved for backward by this step
        if case == "peak" and step == steps - 1:
            out_of_memory(6 * GIB, **CAP)
        if case == "caught" and batch > 16:
            try:
                out_of_memory(batch * 64 * MIB, **CAP)
            except torch.OutOfMemoryError:
                batch //= 2
                continue
        logits = model[2](hidden)
        kept.append(torch.cat([logits] * 64, dim=1))  # the leak: 1 MiB a step, with its graph
        if case != "growth" and case != "ranks":
            kept.clear()
        loss = logits.square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        step += 1
    if case in ("growth", "ranks"):
        logits = model(torch.randn(batch, 64))
        out_of_memory(2 * GIB, **CAP)
    if case == "fragmentation":
        out_of_memory(1 * GIB, **CAP, allocator=(3 * GIB, 512 * MIB))
    if case == "other":
        out_of_memory(1 * GIB, total=80 * GIB, free=512 * MIB)
    if case == "killed":
        mod = observer()
        if mod is not None:  # the samples so far on disk, as a process killed much later would have them
            mod.watch.recorder.lib.tpaudit_v1_flush()
        os.kill(os.getpid(), signal.SIGKILL)
    return model, opt, kept


def ranks():
    """Two ranks of one job: rank 1 dies of the growth OOM, rank 0 trains on."""
    children = []
    for rank, case in ((0, "clean"), (1, "growth")):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE="2", LOCAL_RANK=str(rank))
        children.append(subprocess.Popen([sys.executable, __file__, case], env=env))
    return max(c.wait() for c in children)


if __name__ == "__main__":
    case = sys.argv[1]
    if case == "ranks":
        sys.exit(ranks())
    train(case, steps=int(os.environ.get("OOM_HOST_STEPS", "24")))
