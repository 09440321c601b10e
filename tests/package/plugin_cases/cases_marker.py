"""Run without --tpaudit: only the marked tests are audited, so exactly
test_marked_buggy fails (test_unmarked_buggy is not audited)."""
import pytest

from model import train


@pytest.mark.tpaudit(max_retained="0")
def test_marked_buggy():
    model, optimizer = train("buggy")
    assert optimizer.param_groups


@pytest.mark.tpaudit(max_retained="0")
def test_marked_clean():
    model, optimizer = train("clean")
    assert optimizer.param_groups


def test_unmarked_buggy():
    model, optimizer = train("buggy")
    assert optimizer.param_groups
