"""Benchmark of the tpaudit Python probe (python/tpaudit); prints figures, asserts nothing.

It measures four things, each in its own child interpreter so that one does
not warm or pollute another:

1. gpt2-124m audit: tpaudit.audit(label, models=[model], optimizers=[opt]) on
   a CPU GPT2LMHeadModel(GPT2Config()) (about 150 parameter tensors) whose
   AdamW has state (one forward/backward/step first).  The probe is loaded the
   way a program without LD_PRELOAD gets it: tpaudit.enable() loads
   libtpaudit.so through ctypes (TPAUDIT_LIBRARY), right after torch is
   imported and before the model is built, as the shim's bootstrap would.
   One warm-up audit, then --audits timed ones: median and p90 (nearest
   rank).  The time includes the native side and tpaudit.audit()'s wait for
   the shim's verdict (the audit's commit and the analyzer's queries on it);
   a third figure times the same audit without that wait (_hooks.run_audit,
   the path of a step audit without TPAUDIT_FAIL_FAST).  A second figure runs the same walk (_facts.collect) against a
   recorder whose methods do nothing: the pure-Python share.
2. 10k-tensor audit: the same on a ModuleList of 5,000 Linear(4, 4) layers
   (10,000 parameter tensors) with AdamW state.
3. Unaudited optimizer step: the probe's global step pre-hook
   (_hooks.step_pre) counts the step and asks the audit plan; on a step the
   plan does not name (TPAUDIT_AUDIT=1,2,exit, the default, after step 2)
   that is all it does.  Measured in one process by timing --hook-steps
   .step() calls of a 1-element SGD and of an Optimizer subclass whose step()
   is empty, alternating batches with the hook registered and with it taken
   out of torch.optim.optimizer._global_optimizer_pre_hooks (the baseline);
   the figure is the per-step difference.  The hook is also called directly
   (minus the cost of calling an empty function of the same signature).
4. Training-loop step time: a 2-layer MLP and a tiny GPT-2 (2 layers, 128
   wide), --loop-steps AdamW steps each, torch.set_num_threads(1), run as
   plain python, under LD_PRELOAD=libtpaudit.so with TPAUDIT_PYTHON=off
   (shim only) and under LD_PRELOAD with the probe on (the shim puts
   <build>/share/tpaudit/python on PYTHONPATH; default TPAUDIT_AUDIT, so
   steps 1, 2 and exit are audited).  Median step time over the steps after
   the first 5, pooled over --rounds rounds run in alternating order; the
   loop total includes the audited steps 1 and 2.

    python bench/probe/probe_audit.py [--build DIR] [--quick] [--profile]

--build defaults to $TPAUDIT_BUILD, else ./build.  --quick runs fewer
audits, steps and rounds.  --profile adds a cProfile of one audit of each
audit workload (top functions by own time).  Use the project's venv python
(scripts/setup.sh prints its path).
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
AIM_GPT2_MS = 20.0
AIM_10K_MS = 500.0
AIM_STEP_NS = 2000.0


def p90(values):
    s = sorted(values)
    return s[max(0, math.ceil(0.9 * len(s)) - 1)]


# --------------------------------------------------------------------------
# children
# --------------------------------------------------------------------------

class NullRecorder:
    """Recorder double: the walk's own (Python) cost, nothing sent to the shim."""

    def begin(self, label, step):
        return 1

    def end(self, audit_id):
        return 0

    def tensor(self, *a, **kw):
        return 0

    def ref(self, *a, **kw):
        return 0

    def event(self, *a, **kw):
        return 0

    def set_rank(self, rank, world):
        return 0

    def set_run_info(self, field, value):
        return 0


def _probe_on(probe_dir):
    """Imports torch, then the probe from probe_dir, and installs its hooks."""
    sys.path.insert(0, probe_dir)
    import torch  # noqa: F401
    import tpaudit
    from tpaudit import _hooks
    if not tpaudit.enable() or not _hooks.state.installed:
        raise SystemExit("probe did not start (library %s)" % os.environ.get("TPAUDIT_LIBRARY"))
    return tpaudit, _hooks


def _profile_one(fn, top=14):
    import cProfile
    import io
    import pstats
    prof = cProfile.Profile()
    prof.enable()
    fn()
    prof.disable()
    buf = io.StringIO()
    st = pstats.Stats(prof, stream=buf)
    st.sort_stats("tottime").print_stats(top)
    text = buf.getvalue()
    # keep the table, drop pstats' preamble up to the header line
    lines = text.splitlines()
    start = next((i for i, l in enumerate(lines) if "function calls" in l), 0)
    return "\n".join(l for l in lines[start:] if l.strip())


def child_audit(args):
    tpaudit, hooks = _probe_on(args.probe)
    import torch
    from tpaudit import _facts
    torch.manual_seed(0)
    torch.set_num_threads(max(1, min(4, os.cpu_count() or 1)))
    if args.child == "audit-gpt2":
        from transformers import GPT2Config, GPT2LMHeadModel
        model = GPT2LMHeadModel(GPT2Config())
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        x = torch.randint(0, 50257, (1, 16))
        model(x, labels=x).loss.backward()
    else:
        model = torch.nn.ModuleList(torch.nn.Linear(4, 4) for _ in range(args.layers))
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        h = torch.ones(2, 4)
        for layer in model:
            h = torch.tanh(layer(h))
        h.sum().backward()
    opt.step()
    n_params = len(list(model.parameters()))
    n_state = sum(1 for s in opt.state.values() for v in s.values() if isinstance(v, torch.Tensor))

    def one(label):
        t = time.perf_counter_ns()
        aid = tpaudit.audit(label=label, models=[model], optimizers=[opt])
        dt = time.perf_counter_ns() - t
        if aid is None or not hooks.state.enabled:
            raise SystemExit("audit returned %r (probe enabled: %s)" % (aid, hooks.state.enabled))
        return dt

    first = one("bench-warm")
    times = [one("bench-%d" % i) for i in range(args.audits)]
    null = NullRecorder()
    py_times = []
    for i in range(args.audits):
        t = time.perf_counter_ns()
        _facts.collect(null, "null", -1, [model], [opt])
        py_times.append(time.perf_counter_ns() - t)
    nowait_times = []
    for i in range(args.audits):  # a step audit's path: the host does not wait for the verdict
        t = time.perf_counter_ns()
        hooks.run_audit("bench-nowait-%d" % i, -1, [model], [opt])
        nowait_times.append(time.perf_counter_ns() - t)
    out = dict(params=n_params, state=n_state, first_ns=first, ns=times, py_ns=py_times, nowait_ns=nowait_times)
    if args.profile:
        out["profile"] = _profile_one(lambda: tpaudit.audit(label="profile", models=[model], optimizers=[opt]))
        out["profile_null"] = _profile_one(lambda: _facts.collect(null, "null", -1, [model], [opt]))
    return out


def child_step_hook(args):
    tpaudit, hooks = _probe_on(args.probe)
    import gc
    import torch
    import torch.optim.optimizer as optimizer_mod
    table = optimizer_mod._global_optimizer_pre_hooks
    ours = [(k, f) for k, f in table.items() if getattr(f, "__module__", "") == hooks.__name__]
    if len(ours) != 1:
        raise SystemExit("expected one tpaudit step pre-hook, found %d" % len(ours))
    key, hook = ours[0]
    others = len(table) - 1

    class NoopOptimizer(torch.optim.Optimizer):
        def __init__(self, params):
            super().__init__(params, {})

        def step(self, closure=None):
            return None

    def make(kind):
        p = torch.nn.Parameter(torch.zeros(1))
        p.grad = torch.zeros(1)
        if kind == "sgd":
            return torch.optim.SGD([p], lr=0.1)
        return NoopOptimizer([p])

    rounds = 10
    per = max(1, args.hook_steps // rounds)
    results = {}
    for kind in ("sgd", "noop"):
        opt = make(kind)
        for _ in range(50):          # past the audited steps 1 and 2, warm
            opt.step()
        if not hooks.state.enabled:
            raise SystemExit("probe switched itself off")
        step = opt.step
        with_ns, without_ns = [], []
        for r in range(rounds):
            order = (True, False) if r % 2 == 0 else (False, True)
            for active in order:
                if active:
                    table[key] = hook
                else:
                    table.pop(key, None)
                gc.collect()
                t = time.perf_counter_ns()
                for _ in range(per):
                    step()
                dt = (time.perf_counter_ns() - t) / per
                (with_ns if active else without_ns).append(dt)
        table[key] = hook
        diffs = [a - b for a, b in zip(with_ns, without_ns)]
        results[kind] = dict(with_ns=with_ns, without_ns=without_ns, diff_ns=diffs)

    # the hook alone, called directly, against an empty function of the same shape
    def empty(_opt, _args, _kwargs):
        return None
    opt = make("noop")
    for _ in range(5):
        opt.step()
    n = args.hook_steps
    direct = []
    for _ in range(5):
        for fn in (hook, empty):
            t = time.perf_counter_ns()
            for _ in range(n):
                fn(opt, (), {})
            direct.append((fn is hook, (time.perf_counter_ns() - t) / n))
    results["direct_hook_ns"] = min(v for h, v in direct if h)
    results["direct_empty_ns"] = min(v for h, v in direct if not h)
    results["steps_per_mode"] = per * rounds
    results["other_global_hooks"] = others
    results["plan"] = os.environ.get("TPAUDIT_AUDIT")
    return results


def child_loop(args):
    t0 = time.perf_counter()
    import torch
    probe = "tpaudit" in sys.modules and sys.modules["tpaudit"]._hooks.state.installed
    torch.manual_seed(0)
    torch.set_num_threads(1)
    if args.workload == "mlp":
        model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10))

        def batch():
            return torch.randn(64, 256), torch.randint(0, 10, (64,))

        def loss_of(xy):
            return torch.nn.functional.cross_entropy(model(xy[0]), xy[1])
    else:
        from transformers import GPT2Config, GPT2LMHeadModel
        cfg = GPT2Config(n_layer=2, n_embd=128, n_head=4, n_positions=128, vocab_size=1024)
        model = GPT2LMHeadModel(cfg)

        def batch():
            return torch.randint(0, 1024, (8, 64))

        def loss_of(x):
            return model(x, labels=x).loss
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    times = []
    t_loop = time.perf_counter_ns()
    for _ in range(args.loop_steps):
        xy = batch()
        t = time.perf_counter_ns()
        loss_of(xy).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        times.append(time.perf_counter_ns() - t)
    loop_ns = time.perf_counter_ns() - t_loop
    return dict(probe=bool(probe), step_ns=times, loop_ns=loop_ns,
                setup_s=time.perf_counter() - t0 - loop_ns / 1e9)


# --------------------------------------------------------------------------
# parent
# --------------------------------------------------------------------------

def find_build(arg):
    build = Path(arg or os.environ.get("TPAUDIT_BUILD") or "build").resolve()
    lib = build / "lib" / "libtpaudit.so"
    if not lib.exists():
        found = sorted(build.rglob("libtpaudit.so")) if build.is_dir() else []
        if not found:
            raise SystemExit("no libtpaudit.so under %s (run bash scripts/build.sh, or pass --build)" % build)
        lib = found[0]
    probe = lib.parent.parent / "share" / "tpaudit" / "python"
    if not (probe / "tpaudit" / "__init__.py").exists():
        probe = ROOT / "python"
    return build, lib, probe


def clean_env():
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("TPAUDIT_") and k not in ("LD_PRELOAD", "PYTHONPATH")}
    env["PYTHONHASHSEED"] = "0"
    return env


def run_child(argv, env, tmp, name):
    out_dir = tempfile.mkdtemp(prefix=name + "-", dir=tmp)
    env = dict(env, TPAUDIT_OUT=out_dir)
    t = time.perf_counter()
    p = subprocess.run([sys.executable, os.path.abspath(__file__)] + argv, env=env,
                       capture_output=True, text=True)
    wall = time.perf_counter() - t
    if p.returncode != 0 or not p.stdout.strip():
        sys.stderr.write(p.stderr[-4000:])
        raise SystemExit("child %s failed (rc %d)" % (name, p.returncode))
    res = json.loads(p.stdout.strip().splitlines()[-1])
    res["wall_s"] = wall
    res["stderr"] = [l for l in p.stderr.splitlines() if l.strip()]
    res["audits_in_db"] = count_audits(out_dir)
    return res


def count_audits(out_dir):
    import sqlite3
    n = 0
    for db in Path(out_dir).glob("*.db"):
        try:
            c = sqlite3.connect("file:%s?mode=ro" % db, uri=True)
            n += c.execute("select count(*) from audit").fetchone()[0]
            c.close()
        except sqlite3.Error:
            pass
    return n


def ms(ns):
    return ns / 1e6


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", help="build directory (default $TPAUDIT_BUILD or ./build)")
    ap.add_argument("--quick", action="store_true", help="fewer audits, steps and rounds")
    ap.add_argument("--profile", action="store_true", help="cProfile one audit of each audit workload")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--probe", help=argparse.SUPPRESS)
    ap.add_argument("--workload", help=argparse.SUPPRESS)
    ap.add_argument("--audits", type=int, default=None, help="timed audits per workload (10; quick 3)")
    ap.add_argument("--layers", type=int, default=5000, help="Linear layers of the 10k model (2 tensors each)")
    ap.add_argument("--hook-steps", type=int, default=None, help="steps per mode for the hook figure (100000; quick 20000)")
    ap.add_argument("--loop-steps", type=int, default=None, help="training-loop steps (200; quick 60)")
    ap.add_argument("--rounds", type=int, default=None, help="rounds of the loop comparison (2; quick 1)")
    args = ap.parse_args()
    q = args.quick
    args.audits = args.audits or (3 if q else 10)
    args.hook_steps = args.hook_steps or (20000 if q else 100000)
    args.loop_steps = args.loop_steps or (60 if q else 200)
    args.rounds = args.rounds or (1 if q else 2)

    if args.child:
        fn = {"audit-gpt2": child_audit, "audit-10k": child_audit,
              "step-hook": child_step_hook, "loop": child_loop}[args.child]
        print(json.dumps(fn(args)))
        return

    build, lib, probe = find_build(args.build)
    base = clean_env()
    probe_env = dict(base, TPAUDIT_LIBRARY=str(lib))
    common = ["--audits", str(args.audits), "--layers", str(args.layers),
              "--hook-steps", str(args.hook_steps), "--loop-steps", str(args.loop_steps),
              "--probe", str(probe)] + (["--profile"] if args.profile else [])
    try:
        import torch
        torch_v = torch.__version__
    except ImportError:
        torch_v = "?"
    print("tpaudit probe benchmark: python %s, torch %s, %d CPUs, lib %s, probe %s%s"
          % (sys.version.split()[0], torch_v, os.cpu_count() or 0, lib, probe, " (quick)" if q else ""))
    notes, verdicts = [], []

    with tempfile.TemporaryDirectory(prefix="tpaudit-bench-") as tmp:
        # 1, 2: audits
        audit = {}
        for name in ("audit-gpt2", "audit-10k"):
            audit[name] = run_child(["--child", name] + common,
                                    dict(probe_env, TPAUDIT_AUDIT="none"), tmp, name)
        # 3: hook
        hook = run_child(["--child", "step-hook"] + common,
                         dict(probe_env, TPAUDIT_AUDIT="1,2,exit"), tmp, "step-hook")
        # 4: loops
        variants = [("plain", base),
                    ("shim only", dict(base, LD_PRELOAD=str(lib), TPAUDIT_PYTHON="off")),
                    ("shim+probe", dict(base, LD_PRELOAD=str(lib)))]
        loops = {}
        for workload in ("mlp", "gpt2-tiny"):
            pooled = {v: [] for v, _ in variants}
            totals = {v: [] for v, _ in variants}
            walls = {v: [] for v, _ in variants}
            probe_seen = {v: set() for v, _ in variants}
            dbs = {v: [] for v, _ in variants}
            for r in range(args.rounds):
                order = variants if r % 2 == 0 else list(reversed(variants))
                for v, env in order:
                    res = run_child(["--child", "loop", "--workload", workload] + common, env, tmp,
                                    "loop-%s-%s" % (workload, v.replace(" ", "").replace("+", "-")))
                    pooled[v].extend(res["step_ns"][5:])
                    totals[v].append(res["loop_ns"])
                    walls[v].append(res["wall_s"])
                    probe_seen[v].add(res["probe"])
                    dbs[v].append(res["audits_in_db"])
            loops[workload] = dict(pooled=pooled, totals=totals, walls=walls, probe=probe_seen, dbs=dbs)

    # ---- table
    print()
    print("%-40s %s" % ("figure", "value"))
    print("-" * 100)
    for name, label, aim in (("audit-gpt2", "gpt2-124m", AIM_GPT2_MS), ("audit-10k", "10k-tensor", AIM_10K_MS)):
        a = audit[name]
        med, top = ms(statistics.median(a["ns"])), ms(p90(a["ns"]))
        pmed = ms(statistics.median(a["py_ns"]))
        ok = med < aim
        print("%s audit: median %.1f ms p90 %.1f ms (aim < %.0f ms) %s" % (label, med, top, aim, "OK" if ok else "SLOWER"))
        print("    %d params + %d optimizer-state tensors; min %.1f ms, first (warm-up) audit %.1f ms; %d audits timed;"
              " %d audits in the db" % (a["params"], a["state"], ms(min(a["ns"])), ms(a["first_ns"]), len(a["ns"]),
                                        a["audits_in_db"]))
        print("    python walk alone (null recorder): median %.1f ms = %.0f%% of the audit; native+ctypes %.1f ms"
              % (pmed, 100 * pmed / med if med else 0, med - pmed))
        print("    per tensor (params+state): %.1f us" % (1e3 * med / max(1, a["params"] + a["state"])))
        nmed = ms(statistics.median(a["nowait_ns"]))
        print("    without the wait for the verdict (a step audit's path): median %.1f ms; the verdict's wait %.1f ms"
              % (nmed, med - nmed))
        verdicts.append((label + " audit", ok))

    for kind, desc in (("sgd", "SGD, 1-element param"), ("noop", "Optimizer with empty step()")):
        h = hook[kind]
        w, wo = statistics.median(h["with_ns"]), statistics.median(h["without_ns"])
        d = statistics.median(h["diff_ns"])
        ok = d < AIM_STEP_NS
        print("unaudited step overhead (%s): %+.0f ns/step (aim < %.0f ns) %s"
              % (desc, d, AIM_STEP_NS, "OK" if ok else "SLOWER"))
        print("    step with hook %.0f ns, without %.0f ns (ratio %.3f); %d steps per mode in 10 alternating batches;"
              " batch diffs min %.0f max %.0f ns"
              % (w, wo, w / wo, hook["steps_per_mode"], min(h["diff_ns"]), max(h["diff_ns"])))
        verdicts.append(("unaudited step (%s)" % kind, ok))
    dh, de = hook["direct_hook_ns"], hook["direct_empty_ns"]
    print("step pre-hook called directly: %.0f ns per call, %.0f ns net of an empty call (%.0f ns); plan %s"
          % (dh, dh - de, de, hook["plan"]))

    for workload, L in loops.items():
        base_med = statistics.median(L["pooled"]["plain"])
        base_tot = statistics.median(L["totals"]["plain"])
        base_wall = statistics.median(L["walls"]["plain"])
        for v in ("plain", "shim only", "shim+probe"):
            med = statistics.median(L["pooled"][v])
            tot = statistics.median(L["totals"][v])
            wall = statistics.median(L["walls"][v])
            print("%s loop, %-10s: median step %.3f ms (x%.3f), %d-step loop %.0f ms (x%.3f), process %.2f s (x%.2f)"
                  "  probe=%s audits=%s"
                  % (workload, v, ms(med), med / base_med, args.loop_steps, ms(tot), tot / base_tot,
                     wall, wall / base_wall, "/".join(str(x) for x in sorted(L["probe"][v])),
                     ",".join(str(x) for x in L["dbs"][v])))
    print("-" * 100)
    for name, ok in verdicts:
        print("%-40s %s" % (name, "within aim" if ok else "SLOWER than aim"))

    shown = set()
    for res in list(audit.values()) + [hook]:
        for line in res["stderr"]:
            if line not in shown:
                shown.add(line)
                notes.append(line)
    if notes:
        print("\nchild stderr (first lines):")
        for line in notes[:10]:
            print("    " + line)
    if args.profile:
        for name in ("audit-gpt2", "audit-10k"):
            print("\ncProfile of one %s audit (native recorder), by own time:" % name)
            print(audit[name]["profile"])
            print("\ncProfile of one %s walk (null recorder), by own time:" % name)
            print(audit[name]["profile_null"])


if __name__ == "__main__":
    main()
