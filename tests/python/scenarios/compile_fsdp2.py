"""compile_fsdp2.py - FSDP2 (fully_shard on each block and the root) under
torch.compile on 2 gloo ranks (torchrun), a few AdamW steps on the CPU; rank
0 prints each rank's dynamo counters, the code of its graphs and its losses, so
that a run under tpaudit must print what a run without it prints
(test_compile.py).  A torch without FSDP2 + compile on the CPU (before 2.7)
prints "skip: <why>"."""
import hashlib
import json
import sys

import torch
import torch.distributed as dist
from torch import nn
from torch._dynamo.utils import counters

graphs = []


def backend(gm, inputs):
    """aot_eager (autograd's graphs, eager kernels: cheap on the CPU), after
    keeping the code of the graph dynamo made."""
    from torch._dynamo.backends.common import aot_autograd
    from torch._functorch.aot_autograd import make_boxed_func
    graphs.append(gm.code)
    return aot_autograd(fw_compiler=make_boxed_func, bw_compiler=make_boxed_func)(gm, inputs)


def main():
    if tuple(int(v) for v in torch.__version__.split(".")[:2]) < (2, 7):
        # 2.6's FSDP2 under torch.compile calls Stream.record_event, which a
        # CPU stream lacks: the program fails the same with and without tpaudit
        print("skip: torch %s runs no FSDP2 + torch.compile on the CPU (Stream.record_event)" % torch.__version__)
        return 0
    try:
        from torch.distributed.fsdp import fully_shard
    except ImportError:
        print("skip: torch %s has no FSDP2 (torch.distributed.fsdp.fully_shard)" % torch.__version__)
        return 0
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    model = nn.Sequential(*[nn.Sequential(nn.Linear(32, 32), nn.GELU(), nn.LayerNorm(32)) for _ in range(3)],
                          nn.Linear(32, 4))
    for block in list(model)[:3]:
        fully_shard(block)
    fully_shard(model)
    run = torch.compile(model, backend=backend)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    g = torch.Generator().manual_seed(1 + dist.get_rank())
    losses = []
    for _ in range(4):
        x = torch.randn(8, 32, generator=g)
        loss = run(x).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.item().hex())
    seen = {k: dict(v) for k, v in counters.items() if k in ("stats", "frames", "graph_break", "recompiles")}
    rank = dist.get_rank()
    lines = ["%d counters %s" % (rank, json.dumps(seen, sort_keys=True)),
             "%d graphs %d %s" % (rank, len(graphs), hashlib.sha256(json.dumps(graphs).encode()).hexdigest()[:16]),
             "%d losses %s" % (rank, " ".join(losses))]
    every = [None] * dist.get_world_size()
    dist.all_gather_object(every, lines)  # rank 0 prints all: the ranks' writes never interleave
    if rank == 0:
        print("\n".join(line for lines in every for line in lines))
    # both ranks past the gather before either tears gloo down: without it,
    # torch 2.11 ended rank 0 with "terminate called without an active
    # exception" after its output, 1 plain run in 6 on a loaded 2-core machine
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
