"""Lightning precision="bf16-mixed" and accelerate mixed_precision="bf16" on
one GPU, a tiny MLP, three steps.  argv: lightning | accelerate; --seed
replaces the first Linear after the framework built its optimizer."""
import sys
from pathlib import Path

import torch
import torch.nn as nn

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "frameworks" / "scenarios"))
from cases import SEED, lightning_fit, mlp  # noqa: E402  (the CPU suite's programs)


def lightning():
    lightning_fit(accelerator="gpu", precision="bf16-mixed")


def accelerate():
    from accelerate import Accelerator
    acc = Accelerator(mixed_precision="bf16")
    model = mlp()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model, opt = acc.prepare(model, opt)
    if SEED:
        acc.unwrap_model(model)[0] = nn.Linear(8, 16).to(acc.device)
    for _ in range(3):
        loss = model(torch.randn(4, 8, device=acc.device)).float().pow(2).mean()
        acc.backward(loss)
        opt.step()
        opt.zero_grad()


if __name__ == "__main__":
    globals()[sys.argv[1]]()
