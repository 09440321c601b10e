"""Benchmark of the phase marks (python/tpaudit/_phases.py, on under
TPAUDIT_PEAK=backward: one read of the allocators' counters and one record
at each of the four parts of a step); prints figures and their share of a
step measured in the same run, asserts nothing.

One process: torch, then the probe from <build>/share/tpaudit/python
(tpaudit.enable(), TPAUDIT_AUDIT=none, TPAUDIT_PEAK=backward), a CPU GPT-2
124M with AdamW after one eager step (or --cuda: on the current GPU).  The
probe's own PhaseMarks.mark is timed over --marks calls against the same
call of a PhaseMarks whose record is a no-op, alternating, the least of
--rounds rounds each; a step has four marks.

    python bench/probe/phase_marks.py [--build DIR] [--marks 20000] [--rounds 4] [--seq 64] [--cuda 0]
"""
import os
import time

import bench_options  # beside this file


def main():
    args = bench_options.parse(marks=20000, rounds=4, seq=64, cuda=0)
    os.environ["TPAUDIT_PEAK"] = "backward"
    torch = bench_options.start_probe(args, "/tmp/tpaudit-bench-phase-marks")
    from tpaudit import _phases, _track
    from transformers import GPT2Config, GPT2LMHeadModel
    device = "cuda" if args.cuda else "cpu"
    model = GPT2LMHeadModel(GPT2Config()).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randint(0, 50257, (1, args.seq), device=device)
    steps = []
    for _ in range(3):
        t = time.perf_counter()
        model(input_ids=x, labels=x).loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if args.cuda:
            torch.cuda.synchronize()
        steps.append(time.perf_counter() - t)
    step_s = min(steps)
    marks = next(f.__self__ for f in _track.module_call_listeners
                 if isinstance(getattr(f, "__self__", None), _phases.PhaseMarks))
    idle = _phases.PhaseMarks(type("NoRecord", (), {"phase_mark": staticmethod(lambda *a: 0)})(), marks.counts)
    timings = {True: [], False: []}
    for i in range(2 * args.rounds):
        on = i % 2 == 0
        mark = (marks if on else idle).mark
        t = time.perf_counter()
        for _ in range(args.marks):
            mark("forward", "GPT2LMHeadModel")
        timings[on].append((time.perf_counter() - t) / args.marks)
    with_it, without = min(timings[True]), min(timings[False])
    print("phase mark on %s: %.1f us with its record, %.1f us with the counters' read alone"
          % (device, with_it * 1e6, without * 1e6))
    print("four marks' share of one GPT-2 124M step (%.1f ms, seq %d, %s): %.5f"
          % (step_s * 1e3, args.seq, device, 4 * with_it / step_s))


if __name__ == "__main__":
    main()
