"""PyTorch on the GPU under the shim: the seed bug (embedding replaced after
AdamW) next to a cuBLAS matmul and a one-rank NCCL all-reduce.  Run without
arguments it runs itself under `tpaudit run` and checks that NCCL's memory
is listed under libnccl, that the stale table sits in a caching-allocator
segment (libc10_cuda) and that its allocation stack does not go through
NCCL or cuBLAS.  Exit 77 without a GPU.

    python torch_libraries.py TPAUDIT_BIN      (check)
    python torch_libraries.py --child          (the workload)
"""
import json
import os
import subprocess
import sys
import tempfile


def workload():
    import torch
    import torch.distributed as dist
    from torch import nn
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29533")
    dist.init_process_group("nccl", rank=0, world_size=1, device_id=torch.device("cuda:0"))
    model = nn.Sequential(nn.Embedding(50257, 256), nn.Linear(256, 256)).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model[0] = nn.Embedding(50260, 256).cuda()  # replaced after the optimizer
    x = torch.randn(2048, 2048, device="cuda")
    y = x @ x  # cuBLAS
    dist.all_reduce(y)  # NCCL
    ids = torch.randint(0, 50257, (8, 64), device="cuda")
    for _ in range(2):
        opt.zero_grad()
        model(ids).sum().backward()
        opt.step()
    torch.cuda.synchronize()
    dist.destroy_process_group()


def check(tpaudit):
    import torch
    if not torch.cuda.is_available():
        print("skip: no CUDA device")
        return 77
    out = tempfile.mkdtemp()
    r = subprocess.run([tpaudit, "run", "-o", out, "--", sys.executable, __file__, "--child"],
                       capture_output=True, text=True)
    print(r.stderr[-2000:])
    assert r.returncode == 0
    print(subprocess.run([tpaudit, "report", out], capture_output=True, text=True).stdout[:3000])
    doc = json.loads(subprocess.run([tpaudit, "report", "--format", "json", out],
                                    capture_output=True, text=True, check=True).stdout)
    libs = {}
    for run in doc["runs"]:
        for m in run["memory_by_library"]:
            libs[m["library"]] = libs.get(m["library"], 0) + m["bytes"]
    print("memory by library:", libs)
    assert any(n.startswith("libnccl") and b > 0 for n, b in libs.items()), "no NCCL memory under libnccl"
    stale = [f for f in doc["findings"] if f["kind"] == "stale_param"]
    assert stale and stale[0]["tensor"]["name"] == "0.weight"
    frames = stale[0]["allocation"]["stack"]
    mods = " ".join((fr.get("module") or "") + " " + (fr.get("function") or "") for fr in frames)
    assert "nccl" not in mods.lower() and "cublas" not in mods.lower(), frames
    assert "CUDACachingAllocator" in mods or "c10_cuda" in mods, frames
    print("PASS torch libraries")
    return 0


if __name__ == "__main__":
    if sys.argv[1:] == ["--child"]:
        workload()
    else:
        sys.exit(check(sys.argv[1]))
