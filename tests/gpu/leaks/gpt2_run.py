"""What the GPU leak programs (gpt2_leaks.py, gpt2_loops.py) share: their
command line, the GPT-2 on one GPU with its one batch of token ids, and the
`alloc` lines they print for judge.py."""
import argparse

import torch
from transformers import GPT2Config, GPT2LMHeadModel


def arguments(cases, steps):
    """CASE [--twin] [--steps N] [--layers 12] [--batch 4] [--seq 256], CASE one of `cases`."""
    ap = argparse.ArgumentParser()
    ap.add_argument("case", choices=cases)
    ap.add_argument("--twin", action="store_true")
    ap.add_argument("--steps", type=int, default=steps)
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=256)
    return ap.parse_args()


def model_and_batch(args):
    """HF GPT2LMHeadModel from GPT2Config(n_layer=--layers), fp32 on the GPU,
    and the --batch x --seq token ids every step feeds it."""
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(n_layer=args.layers)).cuda()
    return model, torch.randint(0, 50257, (args.batch, args.seq), device="cuda")


def alloc(step, kept=None):
    """The `alloc` line of `step`; with `kept` (the tensors the loop keeps),
    also a `kept <step> <bytes>` line: their device storages' bytes, each
    storage once (what the loop keeps, without the allocator's rounding of
    the blocks it gave them, which memory_allocated() counts)."""
    print("alloc", step, torch.cuda.memory_allocated(), torch.cuda.memory_reserved(), flush=True)
    if kept is not None:
        storages = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes()
                    for t in kept if isinstance(t, torch.Tensor) and t.is_cuda}
        print("kept", step, sum(storages.values()), flush=True)


def finish(args):
    """The lines after the loop: `alloc_end` (its last output dropped) and `done`."""
    torch.cuda.synchronize()
    print("alloc_end", torch.cuda.memory_allocated(), torch.cuda.memory_reserved(), flush=True)
    print("done", args.case, "twin" if args.twin else "leak", args.steps, "peak", torch.cuda.max_memory_allocated())
