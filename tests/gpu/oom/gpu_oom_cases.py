"""Programs that run out of device memory on one GPU, quickly: each caps the
process with torch.cuda.set_per_process_memory_fraction (CAP_GIB, default 6)
and runs unmodified with and without tpaudit (scripts/gpu_oom.sh).  A line the
findings must name ends in `# oom-line: <name>` (oom_checks.py reads them).

cases:
  logits          a 4-layer GPT-2 loop in a function that keeps each step's
                  logits in a list until it runs out (in backward, on the
                  autograd engine's thread): the list, its rate, its line
  logits_compiled the same loop through torch.compile(model): the same
                  finding, holder and lines as in eager mode
  list-module     the same loop at module level
  losses          a training loop in a function that keeps each step's loss
                  with its graph (retain_graph=True) until it runs out
  eval-module     an eval loop under no_grad at module level that keeps each
                  batch's logits until it runs out (no optimizer)
  eval-function   the same eval loop in a function
  batch           two steps at batch 2, then one whose batch is far too large
                  for the cap: out of memory in forward (the step's own peak,
                  no holder, the forward line inside the function)
  batch-backward  a batch whose forward fits and whose backward does not,
                  sized from the peaks measured at batch 1 and 2: out of
                  memory in backward (the step's own peak, the backward line)
  frag            8 MiB tensors, every other one freed: the allocator has the
                  bytes free but in no block large enough for 256 MiB
                  (fragmentation; with expandable_segments:True it runs)
  pin-thread      a DataLoader whose pin-memory thread stages each batch on
                  the GPU: the first batch's staging buffer is past the cap
                  (the OOM on that thread; too large by itself)
  finder          a batch-size finder: catches the OOM, halves the batch,
                  trains on (exit 0: not died of OOM, the caught OOMs are
                  warnings)
"""
import os
import sys

import torch
from allocator_line import print_at_exit  # beside this file

GIB = 1 << 30
MIB = 1 << 20
CAP = float(os.environ.get("CAP_GIB", "6")) * GIB
VOCAB = 50257


def cap():
    torch.cuda.set_per_process_memory_fraction(CAP / torch.cuda.get_device_properties(0).total_memory, 0)
    print_at_exit()


def gpt2(layers=4, optimizer=True):
    """The model and its AdamW (None for an eval loop, which has no optimizer)."""
    from transformers import GPT2Config, GPT2LMHeadModel
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(n_layer=layers)).cuda()
    return model, (torch.optim.AdamW(model.parameters(), lr=1e-4) if optimizer else None)


def batch_of(batch, seq=256):
    return torch.randint(0, VOCAB, (batch, seq), device="cuda")


def step(model, opt, batch, seq=256, retain_graph=False, run=None):
    x = batch_of(batch, seq)
    out = (model if run is None else run)(x, labels=x)  # oom-line: forward (a compiled module has no truth value)
    out.loss.backward(retain_graph=retain_graph)  # oom-line: backward
    opt.step()
    opt.zero_grad(set_to_none=True)
    return out


def logits(compiled=False):
    model, opt = gpt2()
    run = torch.compile(model) if compiled else model
    kept = []
    for n in range(10000):
        out = step(model, opt, 2, run=run)
        kept.append(out.logits)  # oom-line: logits (2 x 256 x 50257 floats a step, with the graph)
    return kept


def losses():
    model, opt = gpt2()
    losses = []
    for n in range(10000):
        out = step(model, opt, 2, retain_graph=True)
        losses.append(out.loss)  # oom-line: losses (each step's loss, with the graph it saved)
    return losses


def eval_function():
    model, _ = gpt2(optimizer=False)
    model.eval()
    outs = []
    with torch.no_grad():
        for n in range(10000):
            outs.append(model(batch_of(2)).logits)  # oom-line: eval-function
    return outs


def batch():
    model, opt = gpt2()
    for n in range(2):
        step(model, opt, 2)
    step(model, opt, 256, seq=1024)


def peaks(model, batch, seq):
    """(forward peak, forward and backward peak) of one step at `batch`, in bytes."""
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    x = batch_of(batch, seq)
    out = model(x, labels=x)
    torch.cuda.synchronize()
    forward = torch.cuda.max_memory_allocated()
    out.loss.backward()
    torch.cuda.synchronize()
    both = torch.cuda.max_memory_allocated()
    del out, x
    model.zero_grad(set_to_none=True)
    return forward, both


def batch_backward():
    """A batch sized so that its forward fits under the cap with a margin and
    its backward needs more than the cap, from the peaks of batches 1 and 2
    (each grows by the same bytes a sample; the backward's grows faster:
    the logits' gradient and each saved activation's)."""
    model, opt = gpt2()
    seq = 1024
    f1, b1 = peaks(model, 1, seq)
    f2, b2 = peaks(model, 2, seq)
    per_forward, per_backward = f2 - f1, b2 - b1
    size = max(2, int((0.93 * CAP - (f1 - per_forward)) // per_forward))
    print("batch-backward: batch %d, forward peak about %.2f GiB, backward peak about %.2f GiB of the %.2f GiB cap"
          % (size, (f1 + (size - 1) * per_forward) / GIB, (b1 + (size - 1) * per_backward) / GIB, CAP / GIB))
    sys.stdout.flush()
    step(model, opt, size, seq=seq)


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
        try:  # two steps: the second holds the optimizer's state too
            for n in range(2):
                step(model, opt, size, seq=1024)
            break
        except torch.OutOfMemoryError:
            size //= 2
            opt.zero_grad(set_to_none=True)
            torch.cuda.empty_cache()
    for n in range(5):
        step(model, opt, size, seq=1024)
    print("finder: batch", size)


class StagedBatch:
    """A batch that the DataLoader's pin-memory thread stages on the GPU (its
    pin_memory()) with a staging buffer for its samples; the first batch's
    buffer is sized past the cap, so the OOM strikes in that thread while the
    program's thread waits for the batch."""

    def __init__(self, samples):
        self.x = torch.stack([tokens for tokens, _ in samples])
        self.staging_bytes = sum(size for _, size in samples)

    def pin_memory(self):
        self.x = self.x.cuda()
        self.staging = torch.empty(self.staging_bytes, dtype=torch.uint8, device="cuda")  # oom-line: pin-thread
        return self


def pin_thread():
    model, opt = gpt2()
    samples = [(torch.randint(0, VOCAB, (256,)), int(CAP) if n < 2 else MIB) for n in range(8)]
    loader = torch.utils.data.DataLoader(samples, batch_size=2, num_workers=1, pin_memory=True, collate_fn=StagedBatch)
    for batch in loader:
        model(batch.x, labels=batch.x).loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


FUNCTIONS = {"logits": logits, "logits_compiled": lambda: logits(compiled=True), "losses": losses, "eval-function": eval_function, "batch": batch,
             "batch-backward": batch_backward, "frag": frag, "finder": finder, "pin-thread": pin_thread}
MODULE_LEVEL = ("list-module", "eval-module")

if __name__ == "__main__":
    case = sys.argv[1]
    if case not in FUNCTIONS and case not in MODULE_LEVEL:
        sys.exit("gpu_oom_cases.py: no case %r (cases: %s)" % (case, ", ".join(list(FUNCTIONS) + list(MODULE_LEVEL))))
    cap()
    if case in FUNCTIONS:
        FUNCTIONS[case]()
    elif case == "list-module":  # the loop at module level, as a first script has it
        model, opt = gpt2()
        kept = []
        for n in range(10000):
            x = batch_of(2)
            out = model(x, labels=x)  # oom-line: list-module-forward
            out.loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            kept.append(out.logits)  # oom-line: list-module
    else:  # eval-module: no optimizer, no grad
        model, _ = gpt2(optimizer=False)
        model.eval()
        outs = []
        with torch.no_grad():
            for n in range(10000):
                outs.append(model(batch_of(2)).logits)  # oom-line: eval-module
