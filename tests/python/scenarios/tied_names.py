"""GPT-2's embedding replaced through set_input_embeddings + tie_weights, the
way a vocabulary-padding helper does it, for the naming tests.

    python tied_names.py CASE [--twin]

CASE: tied (tie_word_embeddings=True), untied, ddp (one gloo process, the
model under DistributedDataParallel), deepspeed (a DeepSpeed engine on its
CPU accelerator, ZeRO stage 1, bf16), wrapped_late (as ColossalAI's
HybridParallelPlugin does it: a policy pads the table and replaces it once
more, as a shard, and only then does a wrapper take the model in, as
`module`).  The buggy order pads the vocabulary
after the optimizer was built; --twin pads it first.  The lines that replace
the embedding carry the markers SET_EMBEDDINGS and TIE_WEIGHTS, which the
tests look up.  Nothing here calls tpaudit.
"""
import os
import sys
import tempfile

import torch
from torch import nn

VOCAB, PADDED, WIDTH = 50257, 50260, 32


def gpt2(tied):
    from transformers import GPT2Config, GPT2LMHeadModel
    torch.manual_seed(0)
    cfg = GPT2Config(n_layer=1, n_head=2, n_embd=WIDTH, n_positions=32, tie_word_embeddings=tied)
    return GPT2LMHeadModel(cfg)


def pad_vocab(model):
    """A new, larger embedding table put in with the model's own setters."""
    old = model.get_input_embeddings()
    new = nn.Embedding(PADDED, WIDTH, dtype=old.weight.dtype, device=old.weight.device)
    with torch.no_grad():
        new.weight[:old.num_embeddings].copy_(old.weight)
    model.set_input_embeddings(new)  # SET_EMBEDDINGS
    model.tie_weights()  # TIE_WEIGHTS
    model.config.vocab_size = model.get_output_embeddings().weight.shape[0]  # the loss's width


def train(step_fn, steps=2):
    torch.manual_seed(1)
    ids = torch.randint(0, VOCAB, (2, 8))
    for _ in range(steps):
        step_fn(ids)


def plain(twin, tied, pads=1, wrap=lambda model: model):
    """The table padded `pads` times (after the optimizer, unless twin), then
    the model given to `wrap` and trained through what it returns."""
    model = gpt2(tied)
    if twin:
        pad_vocab(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for _ in range(0 if twin else pads):
        pad_vocab(model)
    outer = wrap(model)

    def step(ids):
        opt.zero_grad()
        outer(input_ids=ids, labels=ids).loss.backward()
        opt.step()
    train(step)


def rendezvous_file():
    """A file:// rendezvous for a group of one process: no port to share."""
    fd, path = tempfile.mkstemp(prefix="tied_names-")
    os.close(fd)
    os.unlink(path)
    return "file://" + path


def one_process_group():
    import torch.distributed as dist
    dist.init_process_group("gloo", init_method=rendezvous_file(), rank=0, world_size=1)
    return dist


def ddp(twin):
    from torch.nn.parallel import DistributedDataParallel as DDP
    dist = one_process_group()
    model = gpt2(True)
    if twin:
        pad_vocab(model)
    wrapped = DDP(model, find_unused_parameters=True)
    opt = torch.optim.AdamW(wrapped.parameters(), lr=1e-3)
    if not twin:
        pad_vocab(wrapped.module)

    def step(ids):
        opt.zero_grad()
        wrapped(input_ids=ids, labels=ids).loss.backward()
        opt.step()
    train(step)
    dist.destroy_process_group()


def deepspeed_engine(twin):
    os.environ.setdefault("DS_ACCELERATOR", "cpu")
    for name, value in (("RANK", "0"), ("LOCAL_RANK", "0"), ("WORLD_SIZE", "1")):
        os.environ.setdefault(name, value)
    import deepspeed
    deepspeed.init_distributed(dist_backend="gloo", auto_mpi_discovery=False, init_method=rendezvous_file(),
                               rank=0, world_size=1)
    model = gpt2(True).to(torch.bfloat16)
    if twin:
        pad_vocab(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    config = {"train_micro_batch_size_per_gpu": 2, "bf16": {"enabled": True},
              "zero_optimization": {"stage": 1}, "steps_per_print": 1000,
              "zero_allow_untested_optimizer": True}
    engine, _, _, _ = deepspeed.initialize(model=model, optimizer=opt, config=config)
    if not twin:
        pad_vocab(engine.module)

    def step(ids):
        engine.backward(engine(input_ids=ids, labels=ids).loss)
        engine.step()
    train(step)


class Wrapper(nn.Module):
    """A framework's model wrapper (ColossalAI's ModelWrapper keeps it as `module`)."""

    def __init__(self, module):
        super().__init__()
        self.module = module

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)


def wrapped_late(twin):
    """Padded, then replaced once more (the shard), then wrapped."""
    plain(twin, True, pads=2, wrap=Wrapper)


CASES = {"tied": lambda twin: plain(twin, True), "untied": lambda twin: plain(twin, False),
         "ddp": ddp, "deepspeed": deepspeed_engine, "wrapped_late": wrapped_late}

if __name__ == "__main__":
    CASES[sys.argv[1]]("--twin" in sys.argv)
    print("done", sys.argv[1])
