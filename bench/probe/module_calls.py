"""Benchmark of the growth watch's module-call listener (python/tpaudit/_calls.py,
the sample point of loops without an optimizer step); prints figures and the
ratio against a baseline measured in the same run, asserts nothing.

One process: torch, then the probe from <build>/share/tpaudit/python
(tpaudit.enable() loads libtpaudit.so through TPAUDIT_LIBRARY, as
probe_audit.py does), TPAUDIT_AUDIT=none (no audit is timed), a CPU GPT-2
124M (GPT2LMHeadModel(GPT2Config())) trained with AdamW, batch 1 x --seq.

1. Per call: _track.notify_module_call(submodule) with the listener installed
   against the same call with no listener, over --calls calls each.
2. The step: --steps optimizer steps timed in batches that alternate between
   the listener installed and taken out of _track.module_call_listeners; the
   median of each and their ratio (the changed sampling against plain).
   Module calls per step are counted too, so the per-call cost times the
   calls gives the expected share.

    python bench/probe/module_calls.py [--build DIR] [--steps 12] [--seq 128] [--calls 200000]
"""
import statistics
import time

import bench_options  # beside this file


def main():
    args = bench_options.parse(steps=12, seq=128, calls=200000)
    torch = bench_options.start_probe(args, "/tmp/tpaudit-bench-module-calls")
    from tpaudit import _growth, _track
    if _growth.leaks.calls is None:
        raise SystemExit("the growth watch's listener is off (TPAUDIT_LEAKS?)")
    from transformers import GPT2Config, GPT2LMHeadModel
    model = GPT2LMHeadModel(GPT2Config())
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randint(0, 50257, (1, args.seq))
    listener = _growth.leaks.calls
    listeners = _track.module_call_listeners

    block = model.transformer.h[0].mlp  # a submodule: the common case, one id comparison
    timings = {}
    for installed in (True, False, True, False):
        listeners[:] = [listener] if installed else []
        t = time.perf_counter()
        for _ in range(args.calls):
            _track.notify_module_call(block)
        timings.setdefault(installed, []).append((time.perf_counter() - t) / args.calls)
    per_call = min(timings[True]) - min(timings[False])

    counted = [0]

    def count(_module):
        counted[0] += 1

    def step():
        model(input_ids=x, labels=x).loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    listeners[:] = [listener, count]
    step()  # warm-up: AdamW state, allocator; the marker is chosen here
    calls_per_step = counted[0]
    times = {True: [], False: []}
    for i in range(args.steps):
        installed = i % 2 == 0
        listeners[:] = [listener] if installed else []
        t = time.perf_counter()
        step()
        times[installed].append(time.perf_counter() - t)
    listeners[:] = [listener]
    on, off = statistics.median(times[True]), statistics.median(times[False])
    print("module calls per GPT-2 124M step: %d" % calls_per_step)
    print("listener per module call: %.0f ns (%.0f with it, %.0f without)"
          % (per_call * 1e9, min(timings[True]) * 1e9, min(timings[False]) * 1e9))
    print("expected share of a step: %.5f" % (per_call * calls_per_step / off))
    print("gpt2 124M step median: listener %.1f ms, plain %.1f ms, ratio %.4f"
          % (on * 1e3, off * 1e3, on / off))


if __name__ == "__main__":
    main()
