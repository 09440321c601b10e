"""DeepSpeed on the CPU accelerator (or the GPU when there is one): a tiny model, a client torch AdamW,
deepspeed.initialize with ZeRO stage N (argv[1]), three steps.  --seed
replaces the first Linear after initialize (a stale working tensor)."""
import os
import sys

import torch
import torch.nn as nn


def main():
    stage = int(sys.argv[1])
    seed = "--seed" in sys.argv
    gpu = torch.cuda.is_available()
    if not gpu:
        os.environ.setdefault("DS_ACCELERATOR", "cpu")
    import deepspeed
    deepspeed.init_distributed(dist_backend="nccl" if gpu else "gloo")
    dev = "cuda" if gpu else "cpu"
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4)).to(dev, torch.bfloat16)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    config = {"train_micro_batch_size_per_gpu": 4, "bf16": {"enabled": True},
              "zero_optimization": {"stage": stage}, "steps_per_print": 1000,
              "zero_allow_untested_optimizer": True}
    engine, opt, _, _ = deepspeed.initialize(model=model, optimizer=opt, config=config)
    if seed:
        engine.module[0] = nn.Linear(16, 32).to(dev, torch.bfloat16)
    for _ in range(3):
        x = torch.randn(4, 16, dtype=torch.bfloat16, device=dev)
        loss = engine(x).float().pow(2).mean()
        engine.backward(loss)
        engine.step()
    print("loss", float(loss))


if __name__ == "__main__":
    main()
