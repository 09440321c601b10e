"""The probe's shared helpers, each written once (issue 50): the wrappers
above an optimizer found through the holder walk's referrer scan under its
rule (frameworks/holders.py on _holders.py: no code of a proxy runs), the
allocator reader in a process that never used CUDA (_allocator.py: it is
never initialized), the one stack formatter (_stacks.py) and the probe's
own folder (_unmeasured.py)."""
import os
import subprocess
import sys
from pathlib import Path

import torch

PROBE = str(Path(os.environ["TPAUDIT_TEST_LIB"]).parents[1] / "share" / "tpaudit" / "python")
sys.path.insert(0, PROBE)
from tpaudit import _stacks, _unmeasured  # noqa: E402
from tpaudit.frameworks import holders  # noqa: E402


class Wrapper:
    def __init__(self, opt):
        self.optimizer = opt


class Engine(torch.nn.Module):
    """A framework's engine: the wrapper in an attribute and in a dict."""

    def __init__(self, wrapper):
        super().__init__()
        self.wrapper = wrapper
        self.by_name = {"main": wrapper}


class Proxy:
    """Stands for what it wraps: attribute reads go to the target and its
    __class__ is the target's, each counted (code the probe must never run)."""
    runs = 0

    def __init__(self, target):
        object.__setattr__(self, "_target", target)

    def __getattr__(self, name):
        Proxy.runs += 1
        return getattr(object.__getattribute__(self, "_target"), name)

    @property
    def __class__(self):
        Proxy.runs += 1
        return type(object.__getattribute__(self, "_target"))


class Trainer:
    def __init__(self, proxies):
        self.callbacks = proxies

    def step(self, opt):
        return holders.from_frames(opt, sys._getframe())


def names(objs):
    return sorted(type(o).__name__ for o in objs)


def test_wrappers_above_an_optimizer_are_found_without_running_a_proxys_code():
    model = torch.nn.Linear(4, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    wrapper = Wrapper(opt)
    engine = Engine(wrapper)
    proxy = Proxy(wrapper)
    trainer = Trainer([proxy, {"main": wrapper}])
    Proxy.runs = 0
    above = holders.from_referrers(opt, [])
    # the holder, and above it: through an attribute, the engine's dict, the trainer's list's dict
    assert names(above) == ["Engine", "Proxy", "Trainer", "Wrapper"]
    assert names(trainer.step(opt)) == ["Trainer"]  # a dict in its callbacks holds the wrapper, which holds opt
    assert holders.holds(engine, {id(opt)}) and holders.holds(proxy, {id(wrapper)})
    assert Proxy.runs == 0
    assert engine.wrapper is wrapper


def test_an_optimizer_nobody_wraps_has_no_holders():
    model = torch.nn.Linear(4, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    proxy = Proxy(torch.nn.Linear(2, 2))  # a proxy of something else beside it
    Proxy.runs = 0
    assert holders.from_referrers(opt, []) == []
    assert Trainer([proxy]).step(opt) == []
    assert Proxy.runs == 0


def test_the_allocator_reader_never_initializes_cuda():
    code = ("import sys; sys.path.insert(0, %r); import torch; from tpaudit import _allocator as a; "
            "print(a.live_bytes()[1:], a.measured({'cpu', 'cuda:0', 'cuda'}), a.current_devices(), "
            "a.free_state(0), a.live_bytes()[0] > 0, torch.cuda.is_initialized())" % PROBE)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[0] == "(-1, 'cpu') {} set() (None, None) True False"


def _events_stack():
    return _stacks.event_stack(sys._getframe())


def test_stacks_leave_the_probes_frames_out():
    here = os.path.abspath(__file__)
    event = _events_stack().split("\n")
    assert event[0] == "%s:%d:_events_stack" % (here, _events_stack.__code__.co_firstlineno + 1)
    assert event[1].startswith(here + ":") and event[1].endswith(":test_stacks_leave_the_probes_frames_out")
    assert not any(_unmeasured.own_code(line) for line in event)
    # a user's stack: .py frames outside torch, the user's before installed packages'
    # (inductor's generated code, in its cache directory, is no user's)
    frames = [(_unmeasured.DIR + "/_hooks.py", 1, "probe"), ("/x/tmp/torchinductor_u/ab/cab.py", 9, "call"),
              ("/x/site-packages/torch/nn/module.py", 2, "call"),
              ("/x/site-packages/pkg/loop.py", 3, "fit"), ("/x/project/train.py", 4, "main"), ("<string>", 5, "m")]
    assert _stacks.text(frames, 24, user_first=True) == "/x/project/train.py:4:main\n/x/site-packages/pkg/loop.py:3:fit"
    assert _stacks.text(frames, 24, user_first=False).split("\n") == [
        "/x/tmp/torchinductor_u/ab/cab.py:9:call", "/x/site-packages/torch/nn/module.py:2:call",
        "/x/site-packages/pkg/loop.py:3:fit", "/x/project/train.py:4:main", "<string>:5:m"]


def test_the_probes_own_code_under_either_name():
    for name in (_stacks.__file__, _unmeasured.PREFIX + _stacks.__file__, holders.__file__):
        assert _unmeasured.own_code(name)
    for name in (__file__, _unmeasured.DIR + "_elsewhere/x.py", _unmeasured.PREFIX + "/x.py"):
        assert not _unmeasured.own_code(name)
