"""forward_raises.py [--compile] - a model whose inner forward raises at its
third step, uncaught: the program dies with Python's traceback through
every module call (test_compile.py: the same traceback, line for line, with
and without tpaudit).  --compile runs the model through torch.compile
(backend eager): dynamo's traceback."""
import sys

import torch
from torch import nn


class Fails(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.calls = 0

    def forward(self, x):
        if x.shape[0] == 3:
            raise ValueError("a batch of 3 is not allowed here")
        return self.lin(x)


def main():
    model = nn.Sequential(nn.Linear(4, 4), Fails())
    run = torch.compile(model, backend="eager") if "--compile" in sys.argv else model
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for batch in (1, 2, 3):
        run(torch.randn(batch, 4)).sum().backward()
        opt.step()


if __name__ == "__main__":
    main()
