"""FSDP2 (torch.distributed.fsdp.fully_shard), read from torch 2.11 and
2.6; torch 2.4 and 2.5 keep the same module under
torch.distributed._composable.fsdp (watched by that name too); 2.1-2.3 have
no FSDP2.  An error here turns the part framework:fsdp2 off (_parts.py).

- FSDP2 swaps a module's parameter with `module._parameters[name] = param`
  in _fsdp_param.unsafe_setattr_param, which register_parameter never sees.
  watch() wraps that function: a swap between an FSDPParam's sharded_param
  and its _unsharded_param (every unshard/reshard) only updates the probe's
  names; any other swap (fully_shard replacing the original parameter, a
  reset after `to_empty`) is a replacement, reported with its stack.
- live_twins(): while a module holds its unsharded parameter (at a step with
  reshard_after_forward=False, or before the post-backward reshard), the
  sharded parameter FSDP2 keeps for it (the one the optimizer holds) is
  still the model's.
- unsharded(): each unsharded parameter FSDP2 made and the module it is
  for: the parameter a forward used (the autograd graph's AccumulateGrad
  keeps it), whichever one the module holds at the audit
  (_made_by.py: activations by module).
"""
import sys

from .. import _parts
from .._after_import import after_import

PART = "framework:fsdp2"
# (the module of unsafe_setattr_param, the module whose import means fully_shard was used)
PLACES = (("torch.distributed.fsdp._fully_shard._fsdp_param", "torch.distributed.fsdp._fully_shard._fully_shard"),
          ("torch.distributed._composable.fsdp._fsdp_param", "torch.distributed._composable.fsdp.fully_shard"))


def _patch(mod, on_replace):
    if getattr(mod.unsafe_setattr_param, "_tpaudit", False):
        return
    orig = mod.unsafe_setattr_param

    def unsafe_setattr_param(module, param_name, param):
        if not _parts.on(PART):
            return orig(module, param_name, param)
        old = _parts.guard(PART, module._parameters.get, param_name)
        orig(module, param_name, param)
        if old is not param:
            _parts.guard(PART, _swapped, sys._getframe(1), module, param_name, old, param, on_replace)
    unsafe_setattr_param._tpaudit = True
    mod.unsafe_setattr_param = unsafe_setattr_param


def _swapped(frame, module, param_name, old, param, on_replace):
    caller = frame.f_locals.get("self")
    twins = (getattr(caller, "sharded_param", None), getattr(caller, "_unsharded_param", None))
    swap = old is not None and any(old is t for t in twins) and any(param is t for t in twins)
    on_replace(module, param_name, old, param, swap)


def watch(on_replace):
    """Calls on_replace(module, name, old, new, swap) for every FSDP2 parameter swap."""
    for module, _ in PLACES:
        after_import(module, lambda mod: _parts.guard(PART, _patch, mod, on_replace),
                     lambda exc: _parts.fail(PART, exc))


def live_twins(root):
    """(name of the held param, sharded twin) for modules under root that hold
    FSDP2's unsharded parameter instead of the sharded one; none once the
    part is off (_parts.guard around this generator's caller)."""
    if not any(used in sys.modules for _, used in PLACES) or not _parts.on(PART):
        return
    for fp in _fsdp_params(root):
        info = fp._module_info
        held = info.module._parameters.get(info.param_name)
        if held is not None and held is not fp.sharded_param:
            yield held, fp.sharded_param


def _fsdp_params(root):
    """Every FSDPParam of the modules under root that fully_shard grouped."""
    for module in root.modules():
        get_state = getattr(module, "_get_fsdp_state", None)
        if get_state is None:
            continue
        group = getattr(get_state(), "_fsdp_param_group", None)
        yield from getattr(group, "fsdp_params", ()) or ()


def unsharded(root):
    """(unsharded parameter, the module it is for) of the modules under
    root, those FSDP2 made so far; none once the part is off."""
    if not any(used in sys.modules for _, used in PLACES) or not _parts.on(PART):
        return
    for fp in _fsdp_params(root):
        param = getattr(fp, "_unsharded_param", None)
        if param is not None:
            yield param, fp._module_info.module
