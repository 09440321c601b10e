"""Configuration of the tpaudit Python probe, read from the environment.

TPAUDIT_AUDIT names the optimizer steps to audit.  Its one parser is the
shim's (docs/ENVIRONMENT.md); the probe asks it through the exported
tpaudit_v1_audit_wants(step) and tpaudit_v1_audit_next(after), so the probe, tprt and the shim always agree.
Without the shim in the process there is nowhere to record to, and the plan
asks for nothing.
"""
import ctypes
import os

EXIT_STEP = -1  # the step number of the audit at interpreter exit


def _shim_queries():
    """(tpaudit_v1_audit_wants, tpaudit_v1_audit_next) of the libtpaudit.so in
    this process, or (None, None)."""
    from . import _native
    handles = [lambda: ctypes.CDLL(None)]  # LD_PRELOAD or loaded RTLD_GLOBAL
    handles.append(lambda: ctypes.CDLL(_native.library_path(), mode=os.RTLD_NOLOAD))
    for open_handle in handles:
        try:
            lib = open_handle()
            wants, after = lib.tpaudit_v1_audit_wants, lib.tpaudit_v1_audit_next
        except (OSError, AttributeError):
            continue
        wants.restype, wants.argtypes = ctypes.c_int, [ctypes.c_int64]
        after.restype, after.argtypes = ctypes.c_int64, [ctypes.c_int64]
        return wants, after
    return None, None


class AuditPlan:
    """Which optimizer steps to audit.  The hot path keeps, per optimizer,
    the next step due (`first`, then `next_after(n)`) and compares one number
    per step; `wants(n)` answers for any step."""

    def __init__(self, wants, after):
        self._wants, self._after = wants, after
        self.at_exit = self.wants(EXIT_STEP)
        self.first = self.next_after(0)

    def wants(self, step):
        return self._wants is not None and self._wants(int(step)) == 1

    def next_after(self, step):
        """The first step after `step` to audit; 0 when none."""
        return max(0, self._after(int(step))) if self._after is not None else 0


def audit_plan():
    """The shim's plan for TPAUDIT_AUDIT (it reads the variable when it loads)."""
    return AuditPlan(*_shim_queries())


def python_enabled():
    """False when TPAUDIT_PYTHON=off."""
    return os.environ.get("TPAUDIT_PYTHON", "auto").strip().lower() != "off"
