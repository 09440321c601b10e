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


def start_probe(args, name):
    """Loads the probe of args.build in this process with no audit timed
    (TPAUDIT_AUDIT=none, its database under /tmp/tpaudit-bench-NAME) and
    returns the growth watch's module-call listener; exits with a message
    when the probe did not start."""
    build = os.path.abspath(args.build)
    os.environ.setdefault("TPAUDIT_LIBRARY", os.path.join(build, "lib", "libtpaudit.so"))
    os.environ.setdefault("TPAUDIT_OUT", "/tmp/tpaudit-bench-" + name)
    os.environ["TPAUDIT_AUDIT"] = "none"
    import tpaudit
    from tpaudit import _growth
    if not tpaudit.enable() or _growth.leaks.calls is None:
        raise SystemExit("probe did not start (library %s)" % os.environ["TPAUDIT_LIBRARY"])
    return _growth.leaks.calls
