"""Run with `pytest --tpaudit`: exactly test_buggy must fail, with the finding."""
from model import train


def test_buggy():
    model, optimizer = train("buggy")
    assert optimizer.param_groups


def test_clean():
    model, optimizer = train("clean")
    assert optimizer.param_groups
