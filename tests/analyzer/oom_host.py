"""A training program that runs out of device memory, on the CPU: the
probe's out-of-memory observer (tpaudit._oom.on_oom) is called with the
arguments PyTorch's caching allocator gives it (device, bytes asked, the
device's total - or the process's cap - and its free bytes), from inside the
step, while real torch CPU tensors stand in for the step's, and then the
program raises torch.OutOfMemoryError as the allocator would.  Run under the
shim (tpaudit run -- python oom_host.py CASE); without the probe it trains and
raises the same.

cases: growth (a list keeps each step's logits until the OOM), peak (one
step's batch is too large), too-large (one request over the cap by
itself), fragmentation (the allocator's free bytes are in
no one block), other (another process holds the device), caught (a
batch-size finder halves the batch and goes on), clean (no OOM), ranks (two
ranks, rank 1 dies of a growth OOM), killed (SIGKILL after its steps, as the
kernel's OOM killer ends a process out of host memory), backward (the growth
loop whose last backward runs out: the observer is called, as a CUDA
backward calls it, from a native thread with no Python frame, while the
program's thread waits in backward()), raised and raised-bounded (the growth
loop, and its twin that keeps the last four steps only, in a function that
then dies of an uncaught exception: the list lives on in the traceback's
frames only), returned (the growth loop in a function that returns
normally, its list freed, while the program keeps the model and optimizer
to exit), fragmented-growth (the growth loop, and the allocator's free
bytes in no one block large enough at its OOM), losses (a loop that keeps
each step's loss with its graph, retain_graph=True, until the OOM),
step-graph (a step whose backward runs out while no variable keeps its
loss: what its graph saved is told by module), blocks (the same with HF
GPT-2 of 4 layers built from a small config: its activations told by
block and by the kind of child in them), held-blocks (the same, the
graph kept by the program's `out = gpt(ids, labels=ids)` and the OOM in
the backward of out.loss), observer-fails (the growth loop whose OOM's allocator state cannot be read:
a stage of the observer fails), eval and eval-bounded (an eval loop under
no_grad with no optimizer, in a function, that keeps each batch's outputs,
and its twin that keeps the last four; the OOM strikes inside the model's
forward of the last batch, as a GPU's would)."""
import ctypes
import functools
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


def unreadable(_device):
    raise RuntimeError("the allocator's state cannot be read")


def out_of_memory(asked, total, free, allocator=None):
    """What the caching allocator does when it cannot allocate: its observers,
    then the error.  allocator: its (reserved-but-free, largest free block),
    or a function that reads them."""
    mod = observer()
    if mod is not None:
        if allocator is not None:
            state = sys.modules["tpaudit._allocator"]
            state.free_state = allocator if callable(allocator) else lambda _device: allocator
        mod.on_oom(0, asked, total, free, frame=sys._getframe(1))
    raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate %.2f GiB." % (asked / GIB))


def native_thread_oom(asked, total, free):
    """The observer called from a new native thread (pthread_create) with no
    Python frame above it, as the autograd engine's device threads call it;
    then the error, on the program's thread."""
    mod = observer()
    if mod is not None:
        libc = ctypes.CDLL(None)
        entry = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)(
            functools.partial(mod.on_oom, 0, asked, total, free))  # called from C: no Python frame above on_oom
        tid = ctypes.c_ulong()
        assert libc.pthread_create(ctypes.byref(tid), None, entry, None) == 0
        libc.pthread_join(tid, None)
    raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate %.2f GiB." % (asked / GIB))


class OutOfMemoryInBackward(torch.autograd.Function):
    """Identity forward; its backward runs out of memory (a native thread's observer)."""

    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        native_thread_oom(2 * GIB, **CAP)


CAP = dict(total=2 * GIB, free=64 * GIB)  # set_per_process_memory_fraction: the cap is hit first


def train(case, steps):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 64))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    kept, losses = [], []
    batch = 64
    step = 0
    while step < steps:
        x = torch.randn(batch, 64)
        hidden = model[1](model[0](x))  # saved for backward by this step
        if case in ("peak", "too-large") and step == steps - 1:
            out_of_memory(6 * GIB if case == "too-large" else 3 * GIB // 2, **CAP)
        if case == "caught" and batch > 16:
            try:
                out_of_memory(batch * 64 * MIB, **CAP)
            except torch.OutOfMemoryError:
                batch //= 2
                continue
        logits = model[2](hidden)
        kept.append(torch.cat([logits] * 64, dim=1))  # the leak: 1 MiB a step, with its graph
        if case == "raised-bounded":
            del kept[:-4]  # the twin: the last four steps only
        elif case not in ("growth", "ranks", "backward", "raised", "returned", "fragmented-growth", "observer-fails"):
            kept.clear()
        loss = logits.square().mean()
        opt.zero_grad()
        if case == "losses":
            loss = torch.cat([logits] * 64, dim=1).square().mean()  # its graph saves 1 MiB
            losses.append(loss)  # the leak: each step's loss with its graph
            loss.backward(retain_graph=True)
        else:
            loss.backward()
        opt.step()
        step += 1
    if case in ("growth", "ranks", "losses"):
        logits = model(torch.randn(batch, 64))
        out_of_memory(2 * GIB, **CAP)
    if case == "fragmented-growth":
        out_of_memory(1 * GIB, **CAP, allocator=(3 * GIB, 512 * MIB))
    if case == "observer-fails":
        out_of_memory(1 * GIB, **CAP, allocator=unreadable)
    if case == "backward":
        loss = OutOfMemoryInBackward.apply(model(torch.randn(batch, 64))).square().mean()
        loss.backward()  # the line the OOM's stack must name
    if case == "step-graph":  # no variable keeps the loss: its graph is the step's own
        deep = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256),
                                   torch.nn.ReLU(), torch.nn.Linear(256, 64))
        deep_opt = torch.optim.SGD(deep.parameters(), lr=1e-3)  # noqa: F841 (trained by it, as a program's)
        OutOfMemoryInBackward.apply(deep(torch.randn(16 * batch, 64))).square().mean().backward()
    if case == "blocks":  # a transformer's step: what its graph saved is told by block
        from transformers import GPT2Config, GPT2LMHeadModel
        gpt = GPT2LMHeadModel(GPT2Config(n_layer=4, n_head=4, n_embd=128, vocab_size=512, n_positions=128,
                                         resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0))
        gpt_opt = torch.optim.SGD(gpt.parameters(), lr=1e-3)  # noqa: F841 (trained by it, as a program's)
        ids = torch.randint(0, 512, (8, 64))
        OutOfMemoryInBackward.apply(gpt(ids).logits).square().mean().backward()
    if case == "held-blocks":  # the same, the step's graph kept by the program's variable `out`
        from transformers import GPT2Config, GPT2LMHeadModel
        gpt = GPT2LMHeadModel(GPT2Config(n_layer=4, n_head=4, n_embd=128, vocab_size=512, n_positions=128,
                                         resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0))
        gpt_opt = torch.optim.SGD(gpt.parameters(), lr=1e-3)  # noqa: F841 (trained by it, as a program's)
        ids = torch.randint(0, 512, (8, 64))
        out = gpt(ids, labels=ids)  # its cache, out['past_key_values'], keeps attention's keys and values
        OutOfMemoryInBackward.apply(out.loss).backward()
    if case in ("raised", "raised-bounded"):
        raise RuntimeError("the program's own error, after its loop")
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


class Evaluated(torch.nn.Module):
    """A model whose forward runs out of memory at its call `oom_at`."""

    def __init__(self, oom_at):
        super().__init__()
        self.body = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 64))
        self.calls, self.oom_at = 0, oom_at

    def forward(self, x):
        self.calls += 1
        if self.calls == self.oom_at:
            out_of_memory(2 * GIB, **CAP)  # the batch that does not fit
        return self.body(x)


def evaluate(case, steps):
    """The eval loop: no optimizer, no_grad, each batch's outputs kept (1 MiB)."""
    torch.manual_seed(0)
    model = Evaluated(oom_at=steps).eval()
    outs = []
    with torch.no_grad():
        for n in range(steps):
            outs.append(torch.cat([model(torch.randn(64, 64))] * 64, dim=1))  # the eval leak
            if case == "eval-bounded":
                del outs[:-4]
    return outs


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
    if case.startswith("eval"):
        sys.exit(len(evaluate(case, steps=int(os.environ.get("OOM_HOST_STEPS", "24")))) and 3)
    model, opt = train(case, steps=int(os.environ.get("OOM_HOST_STEPS", "24")))[:2]  # the list freed here
