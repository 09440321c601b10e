"""Scenario: an embedding table replaced after the optimizer was built.

--order buggy: the optimizer holds the old nn.Embedding(50257, C) table, the new
nn.Embedding(50260, C) is in no param group.  --order fixed: replace first.
--compile BACKEND trains the model through torch.compile (test_seed.py: the
same findings, names and lines as in eager mode).
"""
import argparse

import torch
from torch import nn


class Tiny(nn.Module):
    def __init__(self, vocab, width):
        super().__init__()
        self.wte = nn.Embedding(vocab, width)
        self.head = nn.Linear(width, 4)

    def forward(self, ids):
        return self.head(self.wte(ids)).sum()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--order", choices=["buggy", "fixed"], default="buggy")
    ap.add_argument("--width", type=int, default=16)
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--compile", default=None)
    args = ap.parse_args()
    model = Tiny(50257, args.width)
    if args.order == "fixed":
        model.wte = nn.Embedding(50260, args.width)  # REPLACE_FIXED
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    if args.order == "buggy":
        model.wte = nn.Embedding(50260, args.width)  # REPLACE_BUGGY
    ids = torch.arange(8).reshape(2, 4)
    run = torch.compile(model, backend=args.compile) if args.compile else model
    for _ in range(args.steps):
        opt.zero_grad()
        run(ids).backward()
        opt.step()


if __name__ == "__main__":
    main()
