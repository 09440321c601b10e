"""Benchmark of the holder walk at the default audits (steps 1, 2 and
exit); prints figures, asserts nothing.

A CPU GPT-2 124M (GPT2LMHeadModel(GPT2Config()), built from its config)
after one AdamW step, with the step's `outputs` and `loss` still locals of
the training loop, as at a step audit.  The ledger of that moment
(_ledger.record, the part of an audit the walk adds to) is timed with the
holder walk (what every audit does now) and without it (the baseline: what
a default audit did before), alternating, --repeat times each, in one
process; the figure is the ratio of the medians.  Beside it, the share of
the measured bytes each leaves unattributed.

    python bench/probe/default_audit_walk.py [--build DIR] [--repeat K]
"""
import os
import statistics
import time

import bench_options  # beside this file


class Rows:
    """Recorder double that keeps the ledger's rows."""

    def __init__(self):
        self.rows = []

    def ledger(self, row):
        self.rows.append(row)


def unattributed_share(rows):
    measured = sum(r["bytes"] for r in rows if r["owner_kind"] == "measured")
    left = sum(r["bytes"] for r in rows if r["owner_kind"] == "unattributed")
    return left / measured if measured else 0.0


def timed(ledger, model, opt, walk):
    rec = Rows()
    start = time.perf_counter()
    ledger.record(rec, [model], [opt], walk=walk)
    return time.perf_counter() - start, rec.rows


def main():
    args = bench_options.parse(repeat=5)
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel
    from tpaudit import _ledger

    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config())
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    tokens = torch.randint(0, 50257, (2, 64))
    outputs = model(tokens, labels=tokens)  # kept as a training loop keeps its step's locals
    loss = outputs.loss
    loss.backward()
    opt.step()
    timed(_ledger, model, opt, True)  # warm-up
    with_walk, without = [], []
    for _ in range(args.repeat):
        seconds, walked = timed(_ledger, model, opt, True)
        with_walk.append(seconds)
        seconds, plain = timed(_ledger, model, opt, False)
        without.append(seconds)
    a, b = statistics.median(with_walk), statistics.median(without)
    print("gpt2-124m ledger, CPU, after one AdamW step (loss and outputs alive), %d runs each:" % args.repeat)
    print("  without the holder walk (baseline): median %.1f ms, unattributed %.2f%% of measured"
          % (b * 1e3, 100 * unattributed_share(plain)))
    print("  with the holder walk:               median %.1f ms, unattributed %.2f%% of measured"
          % (a * 1e3, 100 * unattributed_share(walked)))
    print("  ratio with / without: %.2fx (load average %.1f)" % (a / b, os.getloadavg()[0]))
    del outputs, loss


if __name__ == "__main__":
    main()
