"""DeepSpeed on the CPU accelerator (or the GPU when there is one): a tiny model, a client torch AdamW,
deepspeed.initialize with ZeRO stage N (argv[1]), bf16 (--fp32: fp32), three
steps.  With bf16 the wrapper's constructor runs a dummy optimizer step (the
inner AdamW's step 1) before any forward.  --seed replaces the first Linear
after initialize (a stale working tensor); --seed-before replaces the head
(the last Linear) before initialize, after the parameters were listed for
the AdamW and model_parameters (ZeRO-1 and 2 refuse such a list)."""
import os
import sys

import torch
import torch.nn as nn


def main():
    stage = int(sys.argv[1])
    seed = "--seed" in sys.argv
    seed_before = "--seed-before" in sys.argv
    dtype = torch.float32 if "--fp32" in sys.argv else torch.bfloat16
    gpu = torch.cuda.is_available()
    if not gpu:
        os.environ.setdefault("DS_ACCELERATOR", "cpu")
    import deepspeed
    deepspeed.init_distributed(dist_backend="nccl" if gpu else "gloo")
    dev = "cuda" if gpu else "cpu"
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4)).to(dev, dtype)
    params = list(model.parameters())
    if seed_before:
        model[2] = nn.Linear(32, 4).to(dev, dtype)
    opt = torch.optim.AdamW(params, lr=1e-3)
    config = {"train_micro_batch_size_per_gpu": 4, "bf16": {"enabled": dtype == torch.bfloat16},
              "zero_optimization": {"stage": stage}, "steps_per_print": 1000,
              "zero_allow_untested_optimizer": True}
    engine, opt, _, _ = deepspeed.initialize(model=model, optimizer=opt, model_parameters=params, config=config)
    if seed:
        engine.module[0] = nn.Linear(16, 32).to(dev, dtype)
    for _ in range(3):
        x = torch.randn(4, 16, dtype=dtype, device=dev)
        loss = engine(x).float().pow(2).mean()
        engine.backward(loss)
        engine.step()
    print("loss", float(loss))


if __name__ == "__main__":
    main()
