"""The tiny model of the plugin cases: an embedding with GPT-2's vocabulary
padded to a multiple of 4 by a new, larger embedding (the seed bug's mechanism),
before the optimizer is built (clean) or after (buggy)."""
import torch
from torch import nn


def train(order):
    model = nn.Sequential(nn.Embedding(50257, 8), nn.Linear(8, 4))
    if order == "clean":
        model[0] = nn.Embedding(50260, 8)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    if order == "buggy":
        model[0] = nn.Embedding(50260, 8)
    model(torch.tensor([[1, 2, 3]])).sum().backward()
    optimizer.step()
    return model, optimizer
