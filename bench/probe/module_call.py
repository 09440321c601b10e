"""Benchmark of the probe's twin of Module.__call__ (python/tpaudit/_forward.py);
prints figures, asserts nothing.

A model of --layers Linear(8, 8)/ReLU pairs (61 module calls a forward with
the default 30) runs forward under torch.no_grad with torch's own
Module.__call__ and with the twin in alternating batches of --calls
forwards, --rounds times, in one process; prints the median time per module
call of each, the difference and the ratio twin/plain.  The twin is built
as the probe builds it (twin_of), without the shim.

    python bench/probe/module_call.py [--build DIR] [--layers N] [--calls K] [--rounds R]
"""
import os
import statistics
import time

import torch
from torch import nn

import bench_options  # beside this file

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    args = bench_options.parse(build=os.path.join(HERE, "..", "..", "build"), layers=30, calls=200, rounds=15)
    from tpaudit import _forward
    Module = torch.nn.Module
    plain = Module.__dict__["__call__"]
    twin = _forward.twin_of(plain, _forward.compiling_test(torch))
    model = nn.Sequential(*[m for _ in range(args.layers) for m in (nn.Linear(8, 8), nn.ReLU())])
    per_forward = sum(1 for _ in model.modules())
    x = torch.randn(4, 8)
    times = {"plain": [], "twin": []}
    with torch.no_grad():
        for _ in range(args.rounds):
            for name, call in (("plain", plain), ("twin", twin)):
                Module.__call__ = call
                model(x)
                t = time.perf_counter()
                for _ in range(args.calls):
                    model(x)
                times[name].append((time.perf_counter() - t) / (args.calls * per_forward))
    Module.__call__ = plain
    p, w = statistics.median(times["plain"]), statistics.median(times["twin"])
    print(f"module calls per forward: {per_forward}")
    print(f"plain {p * 1e9:.0f} ns per module call, twin {w * 1e9:.0f} ns: {(w - p) * 1e9:+.0f} ns, "
          f"ratio twin/plain {w / p:.3f}")


if __name__ == "__main__":
    main()
