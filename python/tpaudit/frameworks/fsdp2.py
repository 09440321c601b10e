"""FSDP2 (torch.distributed.fsdp.fully_shard), read from torch 2.11.

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
"""
import sys

from .._after_import import after_import

MODULE = "torch.distributed.fsdp._fully_shard._fsdp_param"


def _patch(mod, on_replace):
    if getattr(mod.unsafe_setattr_param, "_tpaudit", False):
        return
    orig = mod.unsafe_setattr_param

    def unsafe_setattr_param(module, param_name, param):
        old = module._parameters.get(param_name)
        orig(module, param_name, param)
        if old is param:
            return
        caller = sys._getframe(1).f_locals.get("self")
        twins = (getattr(caller, "sharded_param", None), getattr(caller, "_unsharded_param", None))
        swap = old is not None and any(old is t for t in twins) and any(param is t for t in twins)
        on_replace(module, param_name, old, param, swap)
    unsafe_setattr_param._tpaudit = True
    mod.unsafe_setattr_param = unsafe_setattr_param


def watch(on_replace, on_error):
    """Calls on_replace(module, name, old, new, swap) for every FSDP2 parameter
    swap; on_error(exc) when the patch fails as FSDP2 is imported."""
    after_import(MODULE, lambda mod: _patch(mod, on_replace), on_error)


def live_twins(root):
    """(name of the held param, sharded twin) for modules under root that hold
    FSDP2's unsharded parameter instead of the sharded one."""
    if "torch.distributed.fsdp._fully_shard._fully_shard" not in sys.modules:
        return
    for module in root.modules():
        get_state = getattr(module, "_get_fsdp_state", None)
        if get_state is None:
            continue
        group = getattr(get_state(), "_fsdp_param_group", None)
        for fp in getattr(group, "fsdp_params", ()) or ():
            info = fp._module_info
            held = info.module._parameters.get(info.param_name)
            if held is not None and held is not fp.sharded_param:
                yield held, fp.sharded_param
