"""Benchmark of the replay behind the moment of the device's peak
(python/tpaudit/_peak_moment.compose: the caching allocator's history
between the audit inside backward and the step's next part, replayed once
per planned step); prints figures, asserts nothing.

The history is made up with the shape of a training step's backward:
--blocks blocks allocated at the audit (parameters, optimizer state,
activations), then --events allocator events: each activation freed as its
module's backward ends, a temporary made and freed per event pair, one
gradient made per parameter.  The replay is timed --rounds times (the least
is printed) and set beside a step of --step-ms (the GPT-2 124M step on the
H100 is about 70 ms, docs/PERFORMANCE.md): it runs at the planned steps only
(1 and 2 by default), never in the others.

    python bench/probe/peak_moment.py [--build DIR] [--blocks 2000] [--events 20000] [--rounds 5] [--step-ms 70]
"""
import time

import bench_options  # beside this file


def history(blocks, events):
    """(start blocks, owners, trace, gradients) of a made-up backward."""
    start = [(0x10000000 + i * 0x100000, 512 * (1 + i % 4096)) for i in range(blocks)]
    owners = {addr: ("autograd", "saved for backward in h.%d" % (i % 12)) for i, (addr, _) in enumerate(start)}
    trace, grads = [], {}
    for i in range(events // 2):
        addr = 0x90000000 + (i % 64) * 0x100000
        trace.append({"action": "alloc", "addr": addr, "size": 4096 + i % 5000})
        if i % 3:
            trace.append({"action": "free_requested", "addr": addr, "size": 4096 + i % 5000})
        else:  # an activation goes as its module's backward ends
            addr, size = start[i % blocks]
            trace.append({"action": "free_requested", "addr": addr, "size": size})
    for i in range(0, blocks, 10):
        addr = 0xA0000000 + i * 0x10000
        trace.append({"action": "alloc", "addr": addr, "size": 8192})
        grads[addr] = "h.%d" % (i % 12)
    return start, owners, trace, grads


def main():
    args = bench_options.parse(blocks=2000, events=20000, rounds=5, **{"step-ms": 70})
    from tpaudit import _peak_moment
    start, owners, trace, grads = history(args.blocks, args.events)
    best = None
    for _ in range(args.rounds):
        t = time.perf_counter()
        rows = _peak_moment.compose(start, 1 << 34, trace, owners, grads)
        spent = time.perf_counter() - t
        best = spent if best is None or spent < best else best
    print("replay of %d start blocks and %d events: %.2f ms (least of %d), %d rows; %.3f of a %d ms step, "
          "at the planned steps only" % (args.blocks, len(trace), best * 1e3, args.rounds, len(rows),
                                         best * 1e3 / args.step_ms, args.step_ms))


if __name__ == "__main__":
    main()
