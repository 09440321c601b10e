"""Median step time of GPT-2 124M training (HF GPT2LMHeadModel from config,
bf16 autocast, AdamW, batch 8 x 1024) on one GPU. --history records
PyTorch's own memory history with stacks, for comparison.  --compile runs
the model through torch.compile and prints dynamo's counters (frames,
graphs, graph breaks, recompiles) too, --mode picks torch.compile's mode
(reduce-overhead: CUDA graphs), --fused takes the fused AdamW, and --losses
FILE writes each step's loss (scripts/gpu_compile_guard.sh compares
counters, step times and loss curves with and without tpaudit).  --oom-observer attaches an
out-of-memory observer to the caching allocator, the hook the probe attaches
(python/tpaudit/_oom.py), for bench/gpu/oom_observer.sh."""
import argparse
import json
import statistics
import time

import torch
from transformers import GPT2Config, GPT2LMHeadModel

ap = argparse.ArgumentParser()
ap.add_argument("--steps", type=int, default=30)
ap.add_argument("--history", action="store_true")
ap.add_argument("--compile", action="store_true")
ap.add_argument("--mode", default=None)
ap.add_argument("--fused", action="store_true")
ap.add_argument("--losses", default=None)
ap.add_argument("--oom-observer", action="store_true")
args = ap.parse_args()
if args.history:
    torch.cuda.memory._record_memory_history(stacks="all")
torch.manual_seed(0)
if args.oom_observer:
    torch.cuda.init()
    torch._C._cuda_attach_out_of_memory_observer(lambda device, asked, total, free: None)
model = GPT2LMHeadModel(GPT2Config()).cuda()
run = torch.compile(model, mode=args.mode) if args.compile else model
opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True if args.fused else None)
x = torch.randint(0, 50257, (8, 1024), device="cuda")
times, losses = [], []
for step in range(args.steps):
    torch.cuda.synchronize()
    t = time.perf_counter()
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = run(x, labels=x).loss
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    times.append(time.perf_counter() - t)
    if args.losses:
        losses.append(loss.item())  # after the step's timing
if args.losses:
    with open(args.losses, "w") as f:
        f.write("".join("%d %.6f\n" % (i + 1, v) for i, v in enumerate(losses)))
if args.compile:
    from torch._dynamo.utils import counters
    seen = {k: dict(v) for k, v in counters.items() if k in ("stats", "frames", "graph_break", "recompiles")}
    print("dynamo", json.dumps(seen, sort_keys=True))
print(f"median_step_ms {statistics.median(times[5:]) * 1e3:.2f}")
