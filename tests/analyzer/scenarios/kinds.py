"""Small training programs that make each tpaudit finding kind, and twins
that must make none. Run under `tpaudit run`; the test reads the report.

    python kinds.py CASE [--twin]

CASE: orphan_state, state_shape_mismatch, stale_map_entry, untrained_param,
view (a stale view into a flat buffer), html_name. The audit is taken with the explicit API at the end.
"""
import sys

import torch
from torch import nn

import tpaudit


class MasterWorkingWrapper:
    """A mixed-precision-style wrapper: fp32 masters in the inner optimizer,
    and a map from each master to the model's working parameter."""

    def __init__(self, model):
        self.master_to_working_map = {}
        masters = []
        for p in model.parameters():
            m = p.detach().clone().float().requires_grad_(True)
            self.master_to_working_map[m] = p
            masters.append(m)
        self.optim = torch.optim.AdamW(masters, lr=1e-3)


def step(model, opt):
    loss = model(torch.randn(4, 8)).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()


def main():
    case, twin = sys.argv[1], "--twin" in sys.argv
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2))
    holders = None
    if case == "orphan_state":
        opt = torch.optim.Adagrad(model.parameters())  # state exists from construction
        if not twin:
            model[0].weight = nn.Parameter(model[0].weight.detach().clone())
            opt.param_groups[0]["params"] = list(model.parameters())  # groups remapped, state not
    elif case == "state_shape_mismatch":
        opt = torch.optim.AdamW(model.parameters())
        step(model, opt)
        if not twin:
            opt.state[model[0].weight]["exp_avg"] = torch.zeros(3, 3)
    elif case == "stale_map_entry":
        holders = MasterWorkingWrapper(model)
        opt = holders
        if not twin:
            model[2].weight = nn.Parameter(torch.randn(2, 8))
    elif case == "untrained_param":
        if twin:
            model[0].requires_grad_(False)  # frozen on purpose, left out
        opt = torch.optim.AdamW(model[2].parameters())
        step(model, opt)
    elif case == "view":
        # The first layer's params are views into one flat buffer, as a
        # flat-parameter wrapper lays them out: the bias at offset 0, the
        # weight at element offset 8.  Replacing the weight leaves the
        # optimizer holding the view.
        flat = torch.randn(8 + 64)
        model[0].bias = nn.Parameter(flat[:8])
        model[0].weight = nn.Parameter(flat[8:].view(8, 8))
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        step(model, opt)
        if not twin:
            model[0].weight = nn.Parameter(torch.randn(8, 8))
    elif case == "html_name":
        model[0].register_parameter("<script>alert(1)</script>", nn.Parameter(torch.randn(4)))
        opt = torch.optim.AdamW(model.parameters())
        if not twin:
            model[0].register_parameter("<script>alert(1)</script>", nn.Parameter(torch.randn(4)))
    else:
        raise SystemExit(f"unknown case {case}")
    tpaudit.audit(label="check", models=[model], optimizers=[opt])


if __name__ == "__main__":
    main()
