"""Programs that run out of device memory on one GPU, quickly: each caps the
process with torch.cuda.set_per_process_memory_fraction (CAP_GIB, default 6)
and runs unmodified with and without tpaudit (scripts/gpu_oom.sh).

cases:
  logits   a 4-layer GPT-2 loop that keeps each step's logits in a list
           until it runs out (the finding names the list, its rate, its line)
  logits_compiled  the same loop through torch.compile(model): the same finding
  batch    two steps at batch 2, then one whose batch is far too large for the
           cap (the step's own peak, no holder)
  frag     8 MiB tensors, every other one freed: the allocator has the bytes
           free but in no block large enough for 256 MiB (fragmentation; with
           PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True it runs)
  finder   a batch-size finder: catches the OOM, halves the batch, trains on
           (exit 0: not died of OOM, the caught OOMs are warnings)
"""
import os
import sys

import torch

GIB = 1 << 30
MIB = 1 << 20


def cap():
    total = torch.cuda.get_device_properties(0).total_memory
    torch.cuda.set_per_process_memory_fraction(float(os.environ.get("CAP_GIB", "6")) * GIB / total, 0)


def gpt2(layers=4):
    from transformers import GPT2Config, GPT2LMHeadModel
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(n_layer=layers)).cuda()
    return model, torch.optim.AdamW(model.parameters(), lr=1e-4)


def step(model, opt, batch, seq=256, run=None):
    x = torch.randint(0, 50257, (batch, seq), device="cuda")
    out = (run or model)(x, labels=x)
    out.loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    return out


def logits(compiled=False):
    model, opt = gpt2()
    run = torch.compile(model) if compiled else model
    kept = []
    for n in range(10000):
        out = step(model, opt, 2, run=run)
        kept.append(out.logits)  # the leak: 2 x 256 x 50257 floats a step, with the graph
    return kept


def batch():
    model, opt = gpt2()
    for n in range(2):
        step(model, opt, 2)
    step(model, opt, 256, seq=1024)


def frag():
    blocks = [torch.empty(8 * MIB, dtype=torch.uint8, device="cuda") for _ in range(int(0.97 * CAP / (10 * MIB)))]
    del blocks[::2]  # every other one freed: holes of 8 MiB between live blocks
    big = torch.empty(256 * MIB, dtype=torch.uint8, device="cuda")
    print("frag: the 256 MiB tensor fit", big.numel() // MIB, "MiB")
    return blocks


def finder():
    model, opt = gpt2()
    size = 512
    while True:
        try:
            step(model, opt, size, seq=1024)
            break
        except torch.OutOfMemoryError:
            size //= 2
            torch.cuda.empty_cache()
    for n in range(5):
        step(model, opt, size, seq=1024)
    print("finder: batch", size)


CAP = float(os.environ.get("CAP_GIB", "6")) * GIB

if __name__ == "__main__":
    cap()
    {"logits": logits, "logits_compiled": lambda: logits(compiled=True), "batch": batch, "frag": frag,
     "finder": finder}[sys.argv[1]]()
