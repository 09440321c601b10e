"""Benchmark of the probe's holder walk (python/tpaudit/_holders.py); prints
figures, asserts nothing.

The heap: torch imported, then --objects Python objects (default 1,000,000)
of the shapes a training program keeps: records (class instances with a
__dict__) holding a list, a dict and a tuple each, in lists of 1,000 under
one module-level list, with --tensors tensors (default 60) appended to
`kept` the way a leak does, and one tensor behind the last record (so the
walk has to reach the heap's far end).  The walk is timed --repeat times
(median and slowest); beside it, the time of gc.get_objects() over the same
heap (the cheapest thing that touches every object) as a ratio.

    python bench/probe/holder_walk.py [--build DIR] [--objects N] [--repeat K]
"""
import gc
import os
import statistics
import time

import bench_options  # beside this file


class Record:
    def __init__(self, i):
        self.values = [i, i + 1]
        self.meta = {"i": i}
        self.pair = (self.values, self.meta)


def main():
    args = bench_options.parse(objects=1_000_000, tensors=60, repeat=5)
    import torch
    from tpaudit import _holders

    before = len(gc.get_objects())
    per_record = 4  # the instance, its list, dict and tuple (its __dict__ stays inline)
    records = [[Record(i * 1000 + j) for j in range(1000)] for i in range(args.objects // per_record // 1000)]
    records[-1][-1].meta["tensor"] = torch.zeros(4)
    kept = [torch.zeros(16) for _ in range(args.tensors)]
    globals().update(records=records, kept=kept)
    heap = len(gc.get_objects())
    targets = kept + [records[-1][-1].meta["tensor"]]
    own = os.path.dirname(_holders.__file__)
    times = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        found = _holders.find(targets, own, ignore={id(targets)})
        times.append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    everything = gc.get_objects()
    scan = time.perf_counter() - t0
    del everything
    paths = sorted({found[id(t)][1] for t in targets if id(t) in found})
    print("holder walk: %d gc-tracked objects (%d made here, %d before), %d tensors held"
          % (heap, heap - before, before, len(targets)))
    print("  found %d of %d, holders %s" % (len(found), len(targets), ", ".join(paths)))
    print("  walk median %.3f s, slowest %.3f s over %d runs; gc.get_objects() %.3f s (walk %.1fx it)"
          % (statistics.median(times), max(times), len(times), scan, statistics.median(times) / scan))


if __name__ == "__main__":
    main()
