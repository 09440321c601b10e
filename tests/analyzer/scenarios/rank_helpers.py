"""Two gloo ranks on the CPU, each with helper processes of its own: the
torch.compile worker pool (TORCHINDUCTOR_COMPILE_THREADS=2, started as
torch.compile starts it) and a plain child that imports torch.  Run under
`tpaudit run`; the launcher starts the ranks with RANK/WORLD_SIZE set.

    python rank_helpers.py [--stale]

With --stale each rank replaces a layer's weight after building its
optimizer, so both ranks have the same stale tensor."""
import os
import socket
import subprocess
import sys


def rank_main(rank, world, stale):
    import torch
    import torch.distributed as dist
    from torch import nn
    from torch._inductor.async_compile import AsyncCompile

    dist.init_process_group("gloo", rank=rank, world_size=world)
    AsyncCompile.warm_pool()  # inductor's compile workers: subprocesses that import torch
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    if stale:
        model[0].weight = nn.Parameter(torch.randn(16, 16))
    compiled = torch.compile(model)
    subprocess.run([sys.executable, "-c", "import torch; torch.ones(1)"], check=True)
    for _ in range(2):
        loss = compiled(torch.randn(8, 16)).square().mean()
        loss.backward()
        for p in model.parameters():
            if p.grad is not None:
                dist.all_reduce(p.grad)
        opt.step()
        opt.zero_grad()
    dist.barrier()
    dist.destroy_process_group()


def main():
    stale = "--stale" in sys.argv
    if "--rank" in sys.argv:
        rank_main(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), stale)
        return 0
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ranks = []
    for rank in range(2):
        env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(port), TORCHINDUCTOR_COMPILE_THREADS="2")
        ranks.append(subprocess.Popen([sys.executable, __file__, "--rank", *sys.argv[1:]], env=env))
    return max(p.wait() for p in ranks)


if __name__ == "__main__":
    sys.exit(main())
