"""The plugin's growth limit: a loop of 8 optimizer steps that keeps each
step's output in a module-level list (256 KiB a step) and its twin that
keeps only a float.  Run with `--tpaudit --tpaudit-max-growth 64KiB`: the
leak and the marked leak fail with the finding, the twins pass."""
import pytest
import torch
from torch import nn

STEPS = 8
kept = []


def loop(keep):
    model = nn.Linear(64, 1024)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for step in range(STEPS):
        out = model(torch.randn(64, 64))
        keep(out)
        out.sum().backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return model, optimizer


def test_leaking_loop():
    model, optimizer = loop(kept.append)  # made:kept
    assert optimizer.param_groups


def test_bounded_twin():
    losses = []
    model, optimizer = loop(lambda out: losses.append(out.detach().mean().item()))
    assert optimizer.param_groups


@pytest.mark.tpaudit(max_growth="1MiB")
def test_leak_under_the_marker_limit():
    model, optimizer = loop(kept.append)
    assert optimizer.param_groups
