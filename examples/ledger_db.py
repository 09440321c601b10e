"""A small training loop that leaks: it keeps every step's logits, with
their autograd graph, in a module-level list `kept` (the leak users report
most).  Under tpaudit its database has a memory ledger at every audit, a
sample of live memory at every step, and 'growth' audits once the samples
grow, whose ledger names `__main__.kept` and the line that made its tensors.

    tpaudit run -o OUT -- python examples/ledger_db.py [--steps N] [--twin]

--twin keeps only each step's argmax on the CPU (the fixed program: flat).
"""
import argparse

import torch

kept = []


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=24)
    ap.add_argument("--twin", action="store_true")
    args = ap.parse_args()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 512))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randn(128, 64)
    for _ in range(args.steps):
        logits = model(x)
        loss = logits.logsumexp(-1).mean()
        opt.zero_grad()
        loss.backward(retain_graph=True)
        opt.step()
        kept.append(logits.argmax(-1) if args.twin else logits)


if __name__ == "__main__":
    main()
