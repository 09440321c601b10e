"""Ownership scenarios for the probe tests, each with a twin in the correct order.

    python ownership.py CASE [--twin]              (single process)
    torchrun --nproc_per_node 2 ownership.py CASE  (distributed cases, gloo)

Single process: hf_resize, meta_to_empty, tied, frozen, data_pad, gc_freed,
spawn_child, named_params, stale_with_state, numerics (prints its losses), hook_error (a model whose
named_parameters raises inside the audit), explicit (tpaudit.audit() without
the shim preloaded).  Distributed: dtensor_tp, fsdp2, adagrad_fsdp, ddp_before,
ddp_after.  Nothing here calls tpaudit: audits come from the optimizer step
hook (TPAUDIT_AUDIT) and the exit audit, as in an unmodified program.
"""
import gc
import inspect
import os
import sys
import weakref

import torch
from torch import nn


def train(model, opt, make_input, steps=2):
    for _ in range(steps):
        opt.zero_grad()
        model(make_input()).sum().backward()
        opt.step()


def mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 16))


def gpt2(tied):
    from transformers import GPT2Config, GPT2LMHeadModel
    torch.manual_seed(0)
    cfg = GPT2Config(n_layer=1, n_head=2, n_embd=32, n_positions=32, tie_word_embeddings=tied)
    return GPT2LMHeadModel(cfg)


def train_gpt2(model, opt, steps=2):
    ids = torch.randint(0, 50257, (2, 8))
    for _ in range(steps):
        opt.zero_grad()
        model(input_ids=ids, labels=ids).loss.backward()
        opt.step()


def no_mean_resizing(model):
    """mean_resizing=False where resize_token_embeddings has it (transformers
    4.46 on; older releases, e.g. the seed's 4.36, copy the rows without it)."""
    return {"mean_resizing": False} if "mean_resizing" in inspect.signature(model.resize_token_embeddings).parameters else {}


def hf_resize(twin):
    model = gpt2(tied=False)
    if twin:
        model.resize_token_embeddings(50260, **no_mean_resizing(model))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    if not twin:
        model.resize_token_embeddings(50260, **no_mean_resizing(model))  # RESIZE_BUGGY
    train_gpt2(model, opt)


def tied(_twin):
    model = gpt2(tied=True)
    train_gpt2(model, torch.optim.AdamW(model.parameters(), lr=1e-3))


def meta_to_empty(twin):
    with torch.device("meta"):
        model = mlp()
    if twin:
        model.to_empty(device="cpu")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    if not twin:
        model.to_empty(device="cpu")
    for p in model.parameters():
        nn.init.normal_(p, std=0.02) if p.dim() > 1 else nn.init.zeros_(p)
    train(model, opt, lambda: torch.randn(4, 16))


def frozen(_twin):
    model = mlp()
    model[0].requires_grad_(False)  # deliberately frozen and left out
    opt = torch.optim.AdamW(model[2].parameters(), lr=1e-3)
    train(model, opt, lambda: torch.randn(4, 16))


def data_pad(_twin):
    torch.manual_seed(0)
    emb = nn.Embedding(50257, 8)
    opt = torch.optim.AdamW(emb.parameters(), lr=1e-3)
    with torch.no_grad():  # in-place pad: the Parameter keeps its identity
        emb.weight.data = torch.cat([emb.weight.data, torch.zeros(3, 8)])
    train(emb, opt, lambda: torch.arange(6).reshape(2, 3))


def gc_freed(_twin):
    model = mlp()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    train(model, opt, lambda: torch.randn(4, 16))
    refs = [weakref.ref(p) for p in model.parameters()]
    refs += [weakref.ref(t) for s in opt.state.values() for t in s.values() if torch.is_tensor(t)]
    refs += [weakref.ref(model), weakref.ref(opt)]
    del model, opt
    gc.collect()
    alive = sum(r() is not None for r in refs)
    print("gc_freed: %d of %d objects alive" % (alive, len(refs)))
    sys.exit(1 if alive else 0)


def reused_address(_twin):
    """Optimizers made one after another, each let go before the next, until
    one is made at a dead one's address (its id): each is a new optimizer,
    audited at its own steps 1 and 2."""
    model = mlp()
    seen, made, reused = set(), 0, False
    while not reused and made < 64:
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        made += 1
        reused = id(opt) in seen
        seen.add(id(opt))
        train(model, opt, lambda: torch.randn(4, 16), steps=3)
        del opt
        gc.collect()
    print("reused_address: %d optimizers, the last at a dead one's address: %s" % (made, reused))


def numerics(_twin):
    torch.manual_seed(0)
    model = mlp()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    x = torch.randn(8, 16)
    for _ in range(5):
        opt.zero_grad()
        loss = model(x).pow(2).mean()
        loss.backward()
        opt.step()
        print(repr(loss.item()))


class Exploding(nn.Sequential):
    def named_parameters(self, *args, **kwargs):  # breaks only the probe's walk
        if kwargs.get("remove_duplicate") is False:
            raise RuntimeError("named_parameters exploded")
        return super().named_parameters(*args, **kwargs)


def hook_error(_twin):
    torch.manual_seed(0)
    model = Exploding(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 16))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    train(model, opt, lambda: torch.randn(4, 16), steps=4)
    print("training finished")


def named_params(_twin):
    model = mlp()
    opt = torch.optim.AdamW(model.named_parameters(), lr=1e-3)  # groups carry param_names
    model[0] = nn.Linear(16, 32)
    train(model, opt, lambda: torch.randn(4, 16))


def stale_with_state(twin):
    model = mlp()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    train(model, opt, lambda: torch.randn(4, 16), steps=1)  # AdamW state exists now
    if not twin:
        model[2] = nn.Linear(32, 16)
    train(model, opt, lambda: torch.randn(4, 16), steps=2)


def explicit(_twin):
    import tpaudit
    model = mlp()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model[2] = nn.Linear(32, 16)
    found = tpaudit.audit(label="explicit", models=[model], optimizers=[opt])
    print("found", sorted(f["name"] for f in found if f["kind"] == "stale_param"))


def _spawned():
    model = mlp()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model[2] = nn.Linear(32, 16)  # replaced after the optimizer
    train(model, opt, lambda: torch.randn(4, 16))


def spawn_child(_twin):
    import multiprocessing
    ctx = multiprocessing.get_context("spawn")
    child = ctx.Process(target=_spawned)
    child.start()
    child.join()
    sys.exit(child.exitcode)


def _dist():
    import torch.distributed as dist
    dist.init_process_group("gloo")
    from torch.distributed.device_mesh import init_device_mesh
    return init_device_mesh("cpu", (dist.get_world_size(),))


def dtensor_tp(twin):
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
    mesh = _dist()
    model = mlp()
    plan = {"0": ColwiseParallel(), "2": RowwiseParallel()}
    if twin:
        parallelize_module(model, mesh, plan)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    if not twin:
        parallelize_module(model, mesh, plan)
    train(model, opt, lambda: torch.ones(4, 16))


def fsdp2(twin, optimizer=torch.optim.AdamW, remap=False):
    from torch.distributed.fsdp import fully_shard
    _dist()
    model = mlp()
    if twin:
        fully_shard(model)
    opt = optimizer(model.parameters(), lr=1e-3)
    if not twin:
        fully_shard(model)
        if remap:  # param_groups point at the shards, state still keyed by the old tensors
            opt.param_groups[0]["params"] = list(model.parameters())
    try:
        train(model, opt, lambda: torch.ones(4, 16))
    except KeyError as exc:  # Adagrad finds no state for the shards: the bug surfacing
        print("optimizer step failed on missing state %r" % (exc,))


def adagrad_fsdp(twin):
    fsdp2(twin, optimizer=torch.optim.Adagrad, remap=True)


def ddp(before):
    from torch.nn.parallel import DistributedDataParallel as DDP
    _dist()
    model = mlp()
    if before:
        model = DDP(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    if not before:
        model = DDP(model)
    train(model, opt, lambda: torch.ones(4, 16))


CASES = {
    "hf_resize": hf_resize, "meta_to_empty": meta_to_empty, "tied": tied, "frozen": frozen,
    "data_pad": data_pad, "gc_freed": gc_freed, "spawn_child": spawn_child,
    "numerics": numerics, "hook_error": hook_error, "explicit": explicit, "named_params": named_params,
    "stale_with_state": stale_with_state, "reused_address": reused_address,
    "dtensor_tp": dtensor_tp, "fsdp2": fsdp2, "adagrad_fsdp": adagrad_fsdp,
    "ddp_before": lambda _t: ddp(True), "ddp_after": lambda _t: ddp(False),
}

if __name__ == "__main__":
    CASES[sys.argv[1]]("--twin" in sys.argv[2:])
    if os.environ.get("WORLD_SIZE"):
        import torch.distributed as dist
        dist.destroy_process_group()
