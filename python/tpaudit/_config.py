"""Configuration of the tpaudit Python probe, read from the environment.

TPAUDIT_AUDIT names the optimizer steps to audit.  Its one parser is the
shim's (docs/ENVIRONMENT.md); the probe asks it through the exported
tpaudit_v1_audit_wants(step), so the probe, tprt and the shim always agree.
Without the shim in the process there is nowhere to record to, and the plan
asks for nothing.
"""
import ctypes
import os

EXIT_STEP = -1  # the step number of the audit at interpreter exit


def _shim_query():
    """tpaudit_v1_audit_wants of the libtpaudit.so in this process, or None."""
    from . import _native
    handles = [lambda: ctypes.CDLL(None)]  # LD_PRELOAD or loaded RTLD_GLOBAL
    handles.append(lambda: ctypes.CDLL(_native.library_path(), mode=os.RTLD_NOLOAD))
    for open_handle in handles:
        try:
            fn = open_handle().tpaudit_v1_audit_wants
        except (OSError, AttributeError):
            continue
        fn.restype = ctypes.c_int
        fn.argtypes = [ctypes.c_int64]
        return fn
    return None


class AuditPlan:
    """Which optimizer steps to audit; `wants(n)` is the hot-path check."""

    def __init__(self, query):
        self._query = query
        self.at_exit = self.wants(EXIT_STEP)

    def wants(self, step):
        return self._query is not None and self._query(int(step)) == 1


def audit_plan():
    """The shim's plan for TPAUDIT_AUDIT (it reads the variable when it loads)."""
    return AuditPlan(_shim_query())


def python_enabled():
    """False when TPAUDIT_PYTHON=off."""
    return os.environ.get("TPAUDIT_PYTHON", "auto").strip().lower() != "off"
