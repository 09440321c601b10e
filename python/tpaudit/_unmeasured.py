"""Loads the probe so that coverage tools never measure it.

The bootstrap compiles this file itself, under the name PREFIX + its path,
and load_package() imports the tpaudit package the same way: every code
object of the probe gets a file name that starts with "<", the mark of code
that comes from no real file, which coverage.py (and tools like it) never
trace.  A program measured with coverage under the shim so reports what it
reports without it.  The code itself is the package's own, from its .py
files and their cached bytecode; only the name on it changes.

It is also the one place that says where the probe's own code is: DIR, the
package's folder, and own_code(file name), whether a code object's file
name is the probe's, loaded through Loader (PREFIX + DIR) or imported
plainly (DIR: the tests, the pytest plugin without the shim).  The stacks
the probe records and the frames it walks leave those out.
"""
import importlib.machinery
import importlib.util
import os
import sys

PREFIX = "<tpaudit>"
# The package's folder, read from this file's code (PREFIX + its path when
# loaded through Loader), so it is spelled as the code's file names spell it.
_CODE_DIR = os.path.dirname(sys._getframe().f_code.co_filename)
DIR = _CODE_DIR[len(PREFIX):] if _CODE_DIR.startswith(PREFIX) else _CODE_DIR
_OWN_NAMES = (DIR + os.sep, PREFIX + DIR + os.sep)


def own_code(file_name):
    """Whether file_name (a code object's co_filename) is a file of the probe."""
    return file_name.startswith(_OWN_NAMES)


def renamed(code, name):
    """code, and every code object inside it, with co_filename `name`."""
    consts = tuple(renamed(c, name) if isinstance(c, type(code)) else c for c in code.co_consts)
    return code.replace(co_filename=name, co_consts=consts)


class Loader(importlib.machinery.SourceFileLoader):
    """The source loader, with PREFIX before the file name of the code."""

    def get_code(self, fullname):
        code = super().get_code(fullname)
        return renamed(code, PREFIX + code.co_filename)


def _finder_for(directory):
    """Submodules found in `directory` load through Loader."""
    sys.path_importer_cache[directory] = importlib.machinery.FileFinder(directory, (Loader, [".py"]))


def load_package(package_dir):
    """Imports the tpaudit package from package_dir through Loader (once)."""
    if "tpaudit" in sys.modules:
        return sys.modules["tpaudit"]
    for dirpath, dirnames, filenames in os.walk(package_dir):
        dirnames[:] = [d for d in dirnames if not d.startswith(("_", "."))]
        if "__init__.py" in filenames:
            _finder_for(dirpath)
    init = os.path.join(package_dir, "__init__.py")
    spec = importlib.util.spec_from_file_location("tpaudit", init, loader=Loader("tpaudit", init),
                                                  submodule_search_locations=[package_dir])
    module = importlib.util.module_from_spec(spec)
    sys.modules["tpaudit"] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop("tpaudit", None)
        raise
    return module
