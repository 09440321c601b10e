"""The step's activations audited inside backward, with no change to the
program (TPAUDIT_PEAK=backward; off by default).

At the first eager Tensor.backward call before each optimizer step the
audit plan (TPAUDIT_AUDIT) names, the probe takes one more audit there,
labelled 'backward', with the step number of the step about to run: the
backward twin (_backward.py) tells its listeners before torch's body runs,
so everything the step's forward saved for backward is still alive and
the ledger tells it by the module that made it (_made_by.py).  The
analyzer's peak of activations (ANALYZER.md) is the audit whose saved
bytes add up to the most, so a run under TPAUDIT_PEAK=backward has one
without an audit in the program.  A step of several backward calls
(gradient accumulation) is audited at its first.  A loop compiled whole,
whose backward dynamo traces, has no eager backward and no such audit.
Docs: PROBE.md, "The peak of activations with no code change".
"""
import os

from . import _track
from ._structs import PEAK_BACKWARD  # TPAUDIT_PEAK's value that turns this on (tpaudit.h)

LABEL = "backward"  # the audit's label


def wanted():
    """True when TPAUDIT_PEAK asks for audits inside backward."""
    return os.environ.get("TPAUDIT_PEAK", "off").strip().lower() == PEAK_BACKWARD


class BackwardAudits:
    """The backward listener: take(label, step) at the first backward of
    each planned step (step: 1 + the most steps any optimizer has taken)."""

    def __init__(self, plan, step_counts, take):
        self.plan, self.step_counts, self.take = plan, step_counts, take
        self.last = None  # the step of the latest audit taken here

    def __call__(self, _tensor):
        step = _track.coming_step(self.step_counts)
        if step == self.last or not self.plan.wants(step):
            return
        self.last = step
        self.take(LABEL, step)
