"""host_coverage.py - a program measured by coverage.py: `coverage run` of a
small training script, and `pytest --cov --cov-fail-under=30` of a test of
it, in a private directory (so the run's own files stay the same).  It
prints each report's table and each exit status: under the probe they must
be what they are without it (no file of the probe listed, the same TOTAL).
"""
import os
import subprocess
import sys
import tempfile

APP = '''import torch
from torch import nn


def train(steps):
    net = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 1))
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    for _ in range(steps):
        loss = net(torch.ones(2, 4)).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return net


def unused(a, b):
    if a > b:
        return a - b
    for i in range(b):
        a += i
    while a < 100:
        a *= 2
    return a


def also_unused():
    x = [i * i for i in range(10)]
    y = {k: v for k, v in zip(x, x)}
    return sum(y)


if __name__ == "__main__":
    train(3)
'''

# Code no run reaches: the program's coverage stays under the 30% the test
# asks of it, as the probe's files (mostly run) would lift it past.
APP += "".join("""

def unused_%d(a):
    b = a + %d
    c = b * 2
    d = c - a
    e = d // 3
    return e
""" % (i, i) for i in range(16))

TEST = '''import app


def test_train():
    assert app.train(2) is not None
'''


def run(cmd, cwd):
    env = dict(os.environ, COVERAGE_FILE=os.path.join(cwd, ".coverage"), PYTHONDONTWRITEBYTECODE="1")
    r = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    return r.returncode, r.stdout


def table(text):
    """The lines of a coverage table (Name ... TOTAL), without pytest's timings."""
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith("Name")), None)
    end = next((i for i, ln in enumerate(lines) if ln.startswith("TOTAL")), None)
    if start is None or end is None:
        return ["(no table)"]
    found = lines[start:end + 1]
    return found + [ln for ln in lines if "Required test coverage" in ln or "FAIL Required" in ln]


def main():
    with tempfile.TemporaryDirectory(prefix="host-coverage-") as d:
        for name, text in (("app.py", APP), ("test_app.py", TEST)):
            with open(os.path.join(d, name), "w") as f:
                f.write(text)
        rc, _ = run([sys.executable, "-m", "coverage", "run", "app.py"], d)
        print("coverage run", rc)
        rc, out = run([sys.executable, "-m", "coverage", "report"], d)
        print("coverage report", rc)
        print("\n".join(table(out)))
        rc, out = run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--cov", "--cov-report=term",
                       "--cov-fail-under=30", "test_app.py"], d)
        print("pytest --cov --cov-fail-under=30", rc)
        print("\n".join(table(out)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
