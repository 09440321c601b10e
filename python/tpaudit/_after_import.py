"""Run a callback on a module right after it is first imported, without
importing it: a meta path finder that wraps the module's loader.  Used by
the bootstrap (torch) and the FSDP2 watcher (FSDP2's parameter module)."""
import sys


class _Finder:
    def __init__(self, name, callback):
        self.name, self.callback = name, callback

    def find_spec(self, name, path=None, target=None):
        if name != self.name:
            return None
        import importlib.machinery
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        loader, callback = spec.loader, self.callback

        class _Loader:
            def create_module(self, spec):
                return loader.create_module(spec)

            def exec_module(self, module):
                loader.exec_module(module)
                try:
                    callback(module)
                except Exception as exc:  # the program's import goes on; the probe goes off
                    from . import _hooks
                    _hooks.fail(exc)

        spec.loader = _Loader()
        return spec


def after_import(name, callback):
    """callback(module) now if `name` is imported, else right after its import
    (where an error of callback turns the probe off, never the import)."""
    module = sys.modules.get(name)
    if module is not None:
        callback(module)
    else:
        sys.meta_path.insert(0, _Finder(name, callback))
