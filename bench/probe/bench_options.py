"""What the probe benchmarks (bench/probe/*.py) share: their command line,
--build DIR and whole-number options, and the probe they import from that
build's share/tpaudit/python."""
import argparse
import os
import sys


def parse(build=None, **numbers):
    """Parses --build DIR (default `build`, or $TPAUDIT_BUILD, else ./build)
    and --NAME N for each NAME=default of `numbers` (in their order), puts
    the build's probe first on sys.path and returns the options."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=build or os.environ.get("TPAUDIT_BUILD", "build"))
    for name, default in numbers.items():
        ap.add_argument("--" + name, type=int, default=default)
    args = ap.parse_args()
    sys.path.insert(0, os.path.join(args.build, "share", "tpaudit", "python"))
    return args


def start_probe(args, out):
    """Imports torch and starts the probe of args.build in this process
    (tpaudit.enable() loads its libtpaudit.so through TPAUDIT_LIBRARY), its
    databases under `out`, TPAUDIT_AUDIT=none (no audit is timed), one torch
    thread, seed 0; returns torch.  Exits when the probe did not start."""
    os.environ.setdefault("TPAUDIT_LIBRARY", os.path.join(os.path.abspath(args.build), "lib", "libtpaudit.so"))
    os.environ.setdefault("TPAUDIT_OUT", out)
    os.environ["TPAUDIT_AUDIT"] = "none"
    import torch
    import tpaudit
    if not tpaudit.enable():
        raise SystemExit("probe did not start (library %s)" % os.environ["TPAUDIT_LIBRARY"])
    torch.set_num_threads(1)
    torch.manual_seed(0)
    return torch
