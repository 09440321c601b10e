"""Run without --tpaudit: only the marked tests are audited, so exactly
test_marked[buggy] fails (test_unmarked_buggy is not audited)."""
import pytest

from model import train


@pytest.mark.tpaudit(max_retained="0")
@pytest.mark.parametrize("order", ["buggy", "clean"])
def test_marked(order):
    model, optimizer = train(order)  # alive at the test's end, where the audit is
    assert optimizer.param_groups


def test_unmarked_buggy():
    model, optimizer = train("buggy")
    assert model is not None and optimizer is not None
