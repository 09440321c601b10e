"""host_probe_apis.py - what a program sees of the torch functions the probe
patches (Module.__setattr__, register_parameter, add_module, __call__ and
Optimizer.__init__): name, qualname, module, doc, signature and whether each
pickles, printed so that a run under the probe must print the same."""
import hashlib
import inspect
import pickle
import sys

import torch


def main():
    Module, Optimizer = torch.nn.Module, torch.optim.Optimizer
    for f in (Module.__setattr__, Module.register_parameter, Module.add_module, Module.__call__,
              Optimizer.__init__):
        try:
            pickled = pickle.loads(pickle.dumps(f)) is f
        except Exception as exc:
            pickled = "%s: %s" % (type(exc).__name__, exc)
        print(f.__name__, f.__qualname__, f.__module__, hashlib.sha256((f.__doc__ or "").encode()).hexdigest()[:12], inspect.signature(f), pickled)
    net = torch.nn.Linear(2, 2)
    print("bound call", net.__call__.__func__ is Module.__call__, type(net).__call__ is Module.__call__)
    return 0


if __name__ == "__main__":
    sys.exit(main())
