"""Benchmark of the growth watch's library-call test (python/tpaudit/_calls.py,
library_call: the ids of the user frame's variables, read at each call of the
root module that a library makes, that is at each token `generate` makes);
prints figures and the ratio against a baseline measured in the same run,
asserts nothing.

One process: torch, then the probe from <build>/share/tpaudit/python
(tpaudit.enable() loads libtpaudit.so through TPAUDIT_LIBRARY),
TPAUDIT_AUDIT=none (no audit is timed), a CPU GPT-2 (GPT2LMHeadModel from a
config: --layers blocks, the 124M widths) in eval mode.  The loop runs at
module level of a script whose globals number --globals (a long notebook
or training script: the worst case, since a module-level frame's variables
are all of its globals), each `generate` of --tokens new tokens kept in a
list, as the leak a user would have.

1. Per token: library_call(frame) of that module-level frame, over --calls
   calls, against an empty call of the same shape.
2. The loop: --rounds `generate` calls timed one at a time, alternating the
   listener installed and taken out of _track.module_call_listeners; the
   median of each and their ratio (per token and per call).

    python bench/probe/generate_calls.py [--build DIR] [--layers 2] [--tokens 32] [--rounds 12]
                                         [--globals 300] [--calls 20000]
"""
import os
import statistics
import time

import bench_options  # beside this file

LOOP = """
frame = sys._getframe()
t = time.perf_counter()
for _ in range(calls):
    library_call(frame)
per_token = (time.perf_counter() - t) / calls
t = time.perf_counter()
for _ in range(calls):
    empty(frame)
empty_call = (time.perf_counter() - t) / calls
times = {True: [], False: []}
kept = []
for i in range(rounds):
    installed = i % 2 == 0
    listeners[:] = [listener] if installed else []
    t = time.perf_counter()
    out = model.generate(prompt, max_new_tokens=tokens, min_new_tokens=tokens, do_sample=False,
                         pad_token_id=0)
    times[installed].append(time.perf_counter() - t)
    kept.append(out)
listeners[:] = [listener]
"""


def main():
    args = bench_options.parse(layers=2, tokens=32, rounds=12, globals=300, calls=20000)
    torch = bench_options.start_probe(args, "/tmp/tpaudit-bench-generate-calls")
    import sys
    from tpaudit import _calls, _growth, _track
    from transformers import GPT2Config, GPT2LMHeadModel
    listener = _growth.leaks.calls
    if listener is None:
        raise SystemExit("the growth watch's module-call listener is off")
    model = GPT2LMHeadModel(GPT2Config(n_layer=args.layers)).eval()
    script = {"__name__": "__bench_script__", "sys": sys, "time": time, "model": model,
              "prompt": torch.randint(0, 50257, (1, 16)), "tokens": args.tokens,
              "rounds": args.rounds, "calls": args.calls, "listener": listener,
              "listeners": _track.module_call_listeners, "library_call": _calls.library_call,
              "empty": lambda frame: (id(frame), frame.f_lasti, ())}
    script.update(("setting_%d" % i, i) for i in range(max(0, args.globals - len(script))))
    with torch.no_grad():
        exec(compile(LOOP, "<bench generate loop>", "exec"), script)
    on, off = statistics.median(script["times"][True]), statistics.median(script["times"][False])
    per_token = script["per_token"] - script["empty_call"]
    print("module-level frame with %d globals: library_call %.2f us per token (%.2f us the call, %.2f us empty)"
          % (len(script), per_token * 1e6, script["per_token"] * 1e6, script["empty_call"] * 1e6))
    print("gpt2 %d-layer generate of %d tokens median: listener %.1f ms, plain %.1f ms, ratio %.4f"
          % (args.layers, args.tokens, on * 1e3, off * 1e3, on / off))
    print("expected share of a token's forward: %.5f" % (per_token * args.tokens / off))


if __name__ == "__main__":
    main()
