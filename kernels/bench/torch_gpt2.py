"""GPT-2 124M training throughput in PyTorch, the reference rows of
kernels/bench/bench_tprt.sh: HF GPT2LMHeadModel built from GPT2Config() (random
init, no download) with SDPA attention, bf16 autocast, fused AdamW with tprt's
hyper-parameters (betas 0.9/0.95, eps 1e-8, weight decay 0.1 on 2-D weights
only, grad-norm clip 1.0), eager or under torch.compile. Each step is timed
between two synchronizations; the median is over steps WARMUP+1..STEPS
(--warmup, default 9).

Prints one line the bench parses, e.g.
  median system=torch-eager batch=8 seq=1024 steps=10-30 step_ms=59.70 tokens_per_s=137243 compile_s=0.0 status=ok
(status=oom, exit 3, when the batch does not fit; compile_s: step 1's time
minus the median, the compilation's cost, never part of the median).

usage: torch_gpt2.py [--batch B] [--seq T] [--steps S] [--warmup W] [--compile] [--device cuda|cpu] [--tiny]
  --device cpu --tiny: a 2-layer, 64-wide model with a 512-token vocabulary, a smoke check.
"""
import argparse
import statistics
import sys
import time

import torch
import transformers
from transformers import GPT2Config, GPT2LMHeadModel


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=9, help="steps left out of the median (first calls, autotuning)")
    ap.add_argument("--lr", type=float, default=3e-4)
    ap.add_argument("--compile", action="store_true", help="wrap the model in torch.compile (default mode)")
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--tiny", action="store_true", help="a tiny model, for a quick check")
    args = ap.parse_args()
    if args.steps <= args.warmup + 2:
        ap.error(f"--steps must be above {args.warmup + 2} (the median skips steps 1..{args.warmup})")
    return args


def build_config(tiny, seq):
    if not tiny:
        return GPT2Config(attn_implementation="sdpa")
    return GPT2Config(n_layer=2, n_head=2, n_embd=64, n_positions=max(seq, 64), vocab_size=512,
                      bos_token_id=0, eos_token_id=0, attn_implementation="sdpa")


def adamw_for(model, lr, device):
    """tprt's optimizer: decoupled weight decay on 2-D weights, none on biases and layernorms."""
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": 0.1},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.95), eps=1e-8, fused=True)


def train_steps(model, opt, tokens, steps, device):
    """Per-step wall times in seconds, each between two device synchronizations."""
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    params = [p for g in opt.param_groups for p in g["params"]]
    times = []
    for _ in range(steps):
        sync()
        t0 = time.perf_counter()
        with torch.autocast(device, dtype=torch.bfloat16):
            loss = model(tokens, labels=tokens).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        sync()
        times.append(time.perf_counter() - t0)
    return times


def main():
    args = parse_args()
    system = "torch-compile" if args.compile else "torch-eager"
    head = f"median system={system} batch={args.batch} seq={args.seq} steps={args.warmup + 1}-{args.steps}"
    device_name = torch.cuda.get_device_name() if args.device == "cuda" else "cpu"
    print(f"torch_gpt2: torch {torch.__version__}, transformers {transformers.__version__}, {device_name}")
    torch.manual_seed(0)
    torch.set_float32_matmul_precision("high")
    config = build_config(args.tiny, args.seq)
    try:
        model = GPT2LMHeadModel(config).to(args.device)
        model.loss_type = "ForCausalLM"  # unset, HF logs a warning per call: a graph break under torch.compile
        if model.config._attn_implementation != "sdpa":
            print(f"torch_gpt2: attention is {model.config._attn_implementation}, not sdpa", file=sys.stderr)
            return 1
        opt = adamw_for(model, args.lr, args.device)
        run = torch.compile(model) if args.compile else model
        tokens = torch.randint(0, config.vocab_size, (args.batch, args.seq), device=args.device)
        times = train_steps(run, opt, tokens, args.steps, args.device)
    except torch.OutOfMemoryError:
        print(f"{head} step_ms=0 tokens_per_s=0 compile_s=0 status=oom")
        return 3
    median = statistics.median(times[args.warmup:])
    compile_s = max(times[0] - median, 0.0) if args.compile else 0.0
    print(f"{head} step_ms={median * 1e3:.2f} tokens_per_s={args.batch * args.seq / median:.0f} "
          f"compile_s={compile_s:.1f} status=ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
