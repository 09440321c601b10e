"""Benchmark of the silent-step listener (python/tpaudit/_silent_steps.py: the
check, at each eager root-module call, of each optimizer's parameter
versions); prints figures and the ratio against a baseline measured in the
same run, asserts nothing.

One process: torch, then the probe from <build>/share/tpaudit/python
(tpaudit.enable(), TPAUDIT_AUDIT=none: no audit is timed), a CPU GPT-2 124M
with AdamW after one eager step.  _track.notify_module_call(model) is timed
over --calls calls with the listener alone in _track.module_call_listeners
against the same call with no listener, alternating, the least of --rounds
rounds each; the difference is the listener's cost per root call (one a
step in a plain loop), and its share of the step is printed beside it.
Likewise Optimizer.zero_grad (the probe's, which reads the versions too)
over --zero_grads calls against torch's own function under the same
torch._disable_dynamo wrapper (the gradients already gone: the call's
least cost, so the largest ratio).

    python bench/probe/silent_steps.py [--build DIR] [--calls 100000] [--zero_grads 20000] [--rounds 4] [--seq 64]
"""
import time

import bench_options  # beside this file


def main():
    args = bench_options.parse(calls=100000, zero_grads=20000, rounds=4, seq=64)
    torch = bench_options.start_probe(args, "/tmp/tpaudit-bench-silent-steps")
    from tpaudit import _silent_steps, _track
    from transformers import GPT2Config, GPT2LMHeadModel
    model = GPT2LMHeadModel(GPT2Config())
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randint(0, 50257, (1, args.seq))
    t = time.perf_counter()
    model(input_ids=x, labels=x).loss.backward()
    opt.step()
    step_s = time.perf_counter() - t
    listeners = _track.module_call_listeners
    silent = next(f for f in listeners if isinstance(f, _silent_steps.SilentSteps))
    timings = {True: [], False: []}
    for i in range(2 * args.rounds):
        on = i % 2 == 0
        listeners[:] = [silent] if on else []
        t = time.perf_counter()
        for _ in range(args.calls):
            _track.notify_module_call(model)
        timings[on].append((time.perf_counter() - t) / args.calls)
    with_it, without = min(timings[True]), min(timings[False])
    print("silent-step check per root call: %.0f ns (%.0f with it, %.0f without, ratio %.2f)"
          % ((with_it - without) * 1e9, with_it * 1e9, without * 1e9, with_it / without))
    print("share of one GPT-2 124M step (%.0f ms, seq %d): %.7f"
          % (step_s * 1e3, args.seq, (with_it - without) / step_s))
    probed = torch.optim.Optimizer.zero_grad
    heard = getattr(probed, "__wrapped__", None)
    if getattr(heard, "__wrapped__", None) is None:
        print("zero_grad: not the probe's on torch %s" % torch.__version__)
        return
    plain = torch._disable_dynamo(heard.__wrapped__)
    opt.zero_grad(set_to_none=True)
    timings = {True: [], False: []}
    for i in range(2 * args.rounds):
        on = i % 2 == 0
        call = probed if on else plain
        t = time.perf_counter()
        for _ in range(args.zero_grads):
            call(opt)
        timings[on].append((time.perf_counter() - t) / args.zero_grads)
    with_it, without = min(timings[True]), min(timings[False])
    print("zero_grad: %.0f ns added (%.0f with the probe's, %.0f torch's, ratio %.2f)"
          % ((with_it - without) * 1e9, with_it * 1e9, without * 1e9, with_it / without))


if __name__ == "__main__":
    main()
