"""Lightning precision="bf16-mixed" and accelerate mixed_precision="bf16" on
one GPU, a tiny MLP, three steps.  argv: lightning | accelerate; --seed
replaces the first Linear after the framework built its optimizer."""
import sys

import torch
import torch.nn as nn

SEED = "--seed" in sys.argv


def mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))


def lightning():
    import lightning as L

    class Module(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = mlp()

        def training_step(self, batch, _i):
            return self.net(batch[0]).float().pow(2).mean()

        def configure_optimizers(self):
            return torch.optim.AdamW(self.parameters(), lr=1e-3)

        def on_train_start(self):
            if SEED:
                self.net[0] = nn.Linear(8, 16).to(self.device)

    data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(32, 8)), batch_size=4)
    L.Trainer(accelerator="gpu", devices=1, precision="bf16-mixed", max_steps=3, logger=False,
              enable_checkpointing=False, enable_progress_bar=False,
              enable_model_summary=False).fit(Module(), data)


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
