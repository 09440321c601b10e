"""Configuration of the tpaudit Python probe, read from the environment.

TPAUDIT_AUDIT names the optimizer steps to audit: a comma list of 1-based
step numbers, ranges "a-b", "all", "none" and "exit" (at interpreter exit).
"""
import os


class AuditPlan:
    """Which optimizer steps to audit; `wants(n)` is the hot-path check."""

    def __init__(self, text):
        self.all_steps = False
        self.at_exit = False
        self.steps = set()
        self.ranges = []
        for item in (text or "").split(","):
            item = item.strip().lower()
            if not item or item == "none":
                continue
            if item == "all":
                self.all_steps = True
            elif item == "exit":
                self.at_exit = True
            elif "-" in item:
                low, high = item.split("-", 1)
                self.ranges.append((int(low), int(high)))
            else:
                self.steps.add(int(item))

    def wants(self, step):
        if self.all_steps or step in self.steps:
            return True
        for low, high in self.ranges:
            if low <= step <= high:
                return True
        return False


DEFAULT_AUDIT = "1,2,exit"


def audit_plan():
    """The plan from TPAUDIT_AUDIT; a malformed value falls back to the default."""
    try:
        return AuditPlan(os.environ.get("TPAUDIT_AUDIT", DEFAULT_AUDIT))
    except ValueError:
        return AuditPlan(DEFAULT_AUDIT)


def python_enabled():
    """False when TPAUDIT_PYTHON=off."""
    return os.environ.get("TPAUDIT_PYTHON", "auto").strip().lower() != "off"
