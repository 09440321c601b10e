"""Bootstrap of the tpaudit Python probe, put on PYTHONPATH by libtpaudit.so.

Chains to the next sitecustomize on sys.path, then installs a lazy import
hook that sets up the torch hooks right after the program imports torch.
It never imports torch itself.  TPAUDIT_PYTHON=off leaves everything alone.
In a prefix (and the build tree) the `tpaudit` package sits beside this file;
in the Python package this file is tpaudit/_probe/sitecustomize.py, and the
package around it is loaded from its own directory, so an interpreter of
another environment audits with the shim's own probe and nothing else of
that environment's site-packages.
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
    """Imports the package around tpaudit/_probe (the Python package's layout)."""
    import importlib.util
    package = os.path.dirname(_HERE)
    if os.path.isdir(os.path.join(_HERE, "tpaudit")) or "tpaudit" in sys.modules:
        return
    spec = importlib.util.spec_from_file_location("tpaudit", os.path.join(package, "__init__.py"),
                                                  submodule_search_locations=[package])
    module = importlib.util.module_from_spec(spec)
    sys.modules["tpaudit"] = module
    spec.loader.exec_module(module)


def _start():
    try:
        _load_package()
        from tpaudit import _config, _native
        if not _config.python_enabled():
            return
        recorder = _native.load_recorder()
        if recorder is None:
            return
        from tpaudit._after_import import after_import
        if "torch" not in sys.modules:
            recorder.set_run_info("python", "idle: torch not imported")

        def on_torch(_torch):
            import tpaudit
            tpaudit.enable(recorder)
        after_import("torch", on_torch)
    except Exception as exc:
        sys.stderr.write("tpaudit: python probe off: %r\n" % (exc,))


_start()
_chain()
