#!/usr/bin/env python3
"""nsys_gaps.py - how long the GPU sits idle between its operations, per
step, at the end of a tprt run traced by Nsight Systems: reads the CSV of
`nsys stats --report cuda_gpu_trace --format csv` (kernels, memsets and
copies, with their start and duration in ns), takes the last WINDOW_MS of the
GPU timeline and prints the busy and idle time in it, and both per step for
a given step time.  Not a test: it prints figures.
usage: nsys_gaps.py TRACE.csv STEP_MS [WINDOW_STEPS]"""
import csv
import sys


def intervals(path):
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    head = next(i for i, r in enumerate(rows) if r and r[0].startswith("Start"))
    cols = rows[head]
    start, dur = cols.index(next(c for c in cols if c.startswith("Start"))), cols.index(
        next(c for c in cols if c.startswith("Duration")))
    out = []
    for r in rows[head + 1:]:
        try:
            s, d = float(r[start]), float(r[dur])
        except (ValueError, IndexError):
            continue
        out.append((s, s + d))
    return sorted(out)


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__.strip().splitlines()[-1])
    ops, step_ms = intervals(sys.argv[1]), float(sys.argv[2])
    steps = int(sys.argv[3]) if len(sys.argv) > 3 else 10
    if not ops:
        sys.exit("nsys_gaps: no GPU operations in " + sys.argv[1])
    end = max(e for _, e in ops)
    lo = end - steps * step_ms * 1e6
    busy, cur_s, cur_e = 0.0, None, None
    for s, e in ops:  # union of the intervals inside [lo, end]
        s, e = max(s, lo), e
        if e <= lo:
            continue
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                busy += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    busy += cur_e - cur_s
    window = end - lo
    print(f"last {steps} steps of {step_ms:.3f} ms: GPU busy {busy / 1e6 / steps:.3f} ms a step, "
          f"idle {(window - busy) / 1e6 / steps:.3f} ms a step ({100 * (window - busy) / window:.1f}%)")


if __name__ == "__main__":
    main()
