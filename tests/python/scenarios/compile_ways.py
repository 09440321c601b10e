"""compile_ways.py - the ways a user compiles a model with a dynamo backend,
shared by the compile scenario (compile_gpt2.py) and the hostile
tests/hostile/host_compile.py: torch.compile(model), model.compile() in
place, torch.compile(model.forward)."""
import torch

WAYS = ("module", "method", "forward")


def compiled(model, how, backend):
    """What runs `model` once compiled `how` (one of WAYS) with `backend`."""
    if how == "module":
        return torch.compile(model, backend=backend)
    if how == "method":
        model.compile(backend=backend)
        return model
    if how == "forward":
        return torch.compile(model.forward, backend=backend)
    raise ValueError("compile_ways: no way %r (ways: %s)" % (how, ", ".join(WAYS)))
