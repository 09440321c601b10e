"""Bootstrap of the tpaudit Python probe, put on PYTHONPATH by libtpaudit.so.

Chains to the next sitecustomize on sys.path, then installs a lazy import
hook that sets up the torch hooks right after the program imports torch.
It never imports torch itself.  TPAUDIT_PYTHON=off leaves everything alone.
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


class _TorchFinder:
    """Meta path finder: wraps torch's loader to install the hooks after it ran."""

    def __init__(self, recorder):
        self.recorder = recorder

    def find_spec(self, name, path=None, target=None):
        if name != "torch":
            return None
        import importlib.machinery
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        loader, recorder = spec.loader, self.recorder

        class _Loader:
            def create_module(self, spec):
                return loader.create_module(spec)

            def exec_module(self, module):
                loader.exec_module(module)
                import tpaudit
                tpaudit.enable(recorder)

        spec.loader = _Loader()
        return spec


def _start():
    try:
        from tpaudit import _config, _native
        if not _config.python_enabled():
            return
        recorder = _native.load_recorder()
        if recorder is None:
            return
        if "torch" in sys.modules:
            import tpaudit
            tpaudit.enable(recorder)
        else:
            recorder.set_run_info("python", "idle: torch not imported")
            sys.meta_path.insert(0, _TorchFinder(recorder))
    except Exception as exc:
        sys.stderr.write("tpaudit: python probe off: %r\n" % (exc,))


_start()
_chain()
