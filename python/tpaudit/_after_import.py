"""Run a callback on a module right after it is first imported, without
importing it: a meta path finder that wraps the module's loader.  Used by
the bootstrap (torch) and the FSDP2 watcher (FSDP2's parameter module).
It imports nothing of the probe: the caller says what an error of its
callback does (on_error), so no import circle runs through here.
Every import of the program passes through find_spec while a finder waits
(the FSDP2 watcher's, for the whole run when FSDP2 is never imported): its
code is told to dynamo as code it never traces (_dynamo_frames.install), so an
import inside a compiled function is no frame dynamo counts."""
import sys


class _Finder:
    def __init__(self, name, callback, on_error):
        self.name, self.callback, self.on_error = name, callback, on_error

    def find_spec(self, name, path=None, target=None):
        if name != self.name:
            return None
        import importlib.machinery
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        loader, callback, on_error = spec.loader, self.callback, self.on_error

        class _Loader:
            def create_module(self, spec):
                return loader.create_module(spec)

            def exec_module(self, module):
                loader.exec_module(module)
                try:
                    callback(module)
                except Exception as exc:  # the program's import goes on; the probe goes off
                    on_error(exc)

        spec.loader = _Loader()
        return spec


def finder_code():
    """The code objects that run inside the program's imports: find_spec and
    the loader methods defined in it."""
    found, todo = [], [_Finder.find_spec.__code__]
    while todo:
        code = todo.pop()
        found.append(code)
        todo.extend(c for c in code.co_consts if isinstance(c, type(code)))
    return found


def after_import(name, callback, on_error):
    """callback(module) now if `name` is imported, else right after its import,
    where an error of callback goes to on_error(exc) (which turns the probe
    off), never to the import."""
    module = sys.modules.get(name)
    if module is not None:
        callback(module)
    else:
        sys.meta_path.insert(0, _Finder(name, callback, on_error))
