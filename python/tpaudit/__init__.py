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

from . import _collector
from . import _config
from . import _growth
from . import _hooks
from . import _native
from . import _track

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


def enable_after_import(recorder, _torch):
    """enable(recorder), called by the bootstrap right after `import torch`."""
    enable(recorder)


def audit(label="user", models=None, optimizers=None, step=-1):
    """Records one audit point, labelled `label`, and returns what the analyzer
    finds at it: a list of dicts (kind, severity, name, bytes retained,
    replaced_at, message), [] when clean; None when the shim is absent or the
    audit could not be taken or judged (one that saw an optimizer but no model
    parameter judges nothing: docs/ANALYZER.md, "What an audit must have seen").  Under TPAUDIT_FAIL_FAST (`tpaudit run
    --fail-fast`) an audit with an error ends the run: SystemExit(4)."""
    if _hooks.state.recorder is None and not enable():
        return None
    import torch  # noqa: F401  (the caller already uses torch)
    with _collector.held():
        return _audit(label, step, models, optimizers)


def _audit(label, step, models, optimizers):
    if not _hooks.state.installed:
        _hooks.install(_hooks.state.recorder)
    audit_id = _hooks.run_audit(label, step, models, optimizers)
    _growth.leaks.audited(step)
    if audit_id is not None:  # like a step audit: an unchanged run takes no exit audit after it
        _track.changes.at_last_step_audit = _track.changes.count
    verdict = _hooks.judge(audit_id)
    return None if verdict is None or verdict["blind"] else verdict["findings"]
