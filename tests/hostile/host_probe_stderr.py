"""host_probe_stderr.py - a program without a usable stderr meets an error
inside the probe: a module whose extra_repr() raises is replaced after the
optimizer was built (the probe describes both in its replacement event).
First with sys.stderr set to None by the program, then in a child started
with fd 2 closed (Python sets sys.stderr to None itself).  Both must go on
as without the probe: every line printed, exit status 0."""
import os
import subprocess
import sys

import torch
from torch import nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def extra_repr(self):
        raise RuntimeError("no repr here")


def train():
    net = nn.Module()
    net.block = Block()
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    net.block = Block()  # the probe's replacement event calls extra_repr()
    loss = net.block.lin(torch.ones(2, 4)).sum()
    loss.backward()
    opt.step()
    print("trained", sys.argv[1:], flush=True)


def main():
    if sys.argv[1:] == ["closed"]:
        train()
        return 0
    saved, sys.stderr = sys.stderr, None
    train()
    sys.stderr = saved
    child = subprocess.run([sys.executable, os.path.abspath(__file__), "closed"],
                           preexec_fn=lambda: os.close(2))
    print("child exit", child.returncode, flush=True)
    return child.returncode


if __name__ == "__main__":
    sys.exit(main())
