"""Bootstrap of the tpaudit Python probe, put on PYTHONPATH by libtpaudit.so.

Chains to the next sitecustomize on sys.path, then installs a lazy import
hook that sets up the torch hooks right after the program imports torch.
It never imports torch itself.  TPAUDIT_PYTHON=off leaves everything alone.
In a prefix (and the build tree) the `tpaudit` package sits beside this file;
in the Python package this file is tpaudit/_probe/sitecustomize.py, and the
package around it is loaded from its own directory, so an interpreter of
another environment audits with the shim's own probe and nothing else of
that environment's site-packages.  Either way it is loaded through
tpaudit/_unmeasured.py, so that no coverage tool measures it.
"""
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))


def _chain():
    import importlib.machinery
    import importlib.util
    path = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


def _load_package():
    """Imports the tpaudit package beside this file (a prefix, the build tree)
    or around it (tpaudit/_probe in the Python package) through its
    _unmeasured loader, compiled here under that loader's PREFIX: no code of
    the probe carries a real file name, so coverage tools never measure it."""
    if "tpaudit" in sys.modules:
        return
    beside = os.path.join(_HERE, "tpaudit")
    package = beside if os.path.isdir(beside) else os.path.dirname(_HERE)
    path = os.path.join(package, "_unmeasured.py")
    with open(path, "rb") as f:
        code = compile(f.read(), "<tpaudit>" + path, "exec")
    loader = {"__name__": "tpaudit._unmeasured", "__file__": path}
    exec(code, loader)
    loader["load_package"](package)


def _start():
    try:
        _load_package()
        from tpaudit import _config, _native
        if not _config.python_enabled():
            return
        recorder = _native.load_recorder()
        if recorder is None:
            return
        import functools
        import tpaudit
        from tpaudit._after_import import after_import
        if "torch" not in sys.modules:
            recorder.set_run_info("python", "idle: torch not imported")
        # the package's own function (a closure here would be code of this
        # file, run inside the program and so measured by coverage tools)
        after_import("torch", functools.partial(tpaudit.enable_after_import, recorder), tpaudit._hooks.fail)
    except Exception as exc:
        if sys.stderr is not None:  # a program started with fd 2 closed has none
            sys.stderr.write("tpaudit: python probe off: %r\n" % (exc,))


_start()
_chain()
