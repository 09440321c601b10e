"""tpaudit: the PyTorch ownership probe.

Under the shim the bootstrap (sitecustomize) installs the hooks when the
program imports torch.  Programs may also call tpaudit.audit() themselves;
that works without LD_PRELOAD by loading libtpaudit.so through ctypes.
`python -m tpaudit` runs the CLI installed beside the shim; the pytest
plugin is tpaudit.pytest_plugin.  PYTEST_DONT_REWRITE: under `tpaudit run`
the package is imported before pytest loads its plugin (and has no asserts).
"""
import os
import sys

from . import _config
from . import _hooks
from . import _native

__all__ = ["audit", "enable", "cli_path", "library_path"]


def cli_path():
    """The `tpaudit` program of this install (tpaudit/_bin/tpaudit in the
    Python package, <prefix>/bin/tpaudit in a prefix)."""
    return _native.cli_path()


def library_path():
    """libtpaudit.so of this install, the library `tpaudit run` preloads."""
    return _native.library_path()


def enable(recorder=None):
    """Installs the torch hooks now (torch must be importable); True on success."""
    if recorder is None:
        recorder = _hooks.state.recorder or _native.load_recorder()
    if recorder is None:
        return False
    if "torch" in sys.modules:
        _hooks.install(recorder)
    else:
        _hooks.state.recorder = recorder
    return True


def audit(label="user", models=None, optimizers=None, step=-1):
    """Records one audit point; returns its id, or None when the shim is absent."""
    if _hooks.state.recorder is None and not enable():
        return None
    import torch  # noqa: F401  (the caller already uses torch)
    if not _hooks.state.installed:
        _hooks.install(_hooks.state.recorder)
    return _hooks.run_audit(label, step, models, optimizers)
