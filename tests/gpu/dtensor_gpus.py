"""DTensor tensor parallelism across the GPUs of one host under the shim
(torchrun, NCCL): GPT-2-sized blocks built from a config and parallelized
with parallelize_module after the optimizer (the bug) or before it (the
fix).  Each rank prints torch.cuda.memory_allocated so the check can compare
it with the report's per-rank retained bytes; the step time of both orders
is printed for the overhead comparison.  Skips with a reason on fewer than
2 GPUs.

    python dtensor_gpus.py TPAUDIT_BIN        (runs both orders, checks)
    torchrun --nproc_per_node N dtensor_gpus.py --child buggy|fixed
"""
import json
import os
import subprocess
import sys
import tempfile
import time


def child(order):
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
    from transformers import GPT2Config, GPT2LMHeadModel
    rank = int(os.environ["RANK"])
    device = os.environ.get("DTENSOR_SMOKE_DEVICE", "cuda")  # "cpu": a gloo smoke run of this script
    if device == "cuda":
        torch.cuda.set_device(rank % torch.cuda.device_count())
    dist.init_process_group("nccl" if device == "cuda" else "gloo")
    mesh = init_device_mesh(device, (dist.get_world_size(),))
    width = 768 if device == "cuda" else 64
    cfg = GPT2Config(n_layer=4, n_head=4, n_embd=width, n_positions=256, tie_word_embeddings=False)
    model = GPT2LMHeadModel(cfg).to(device)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    plan = {}
    for i in range(cfg.n_layer):
        plan[f"transformer.h.{i}.mlp.c_fc"] = ColwiseParallel()
        plan[f"transformer.h.{i}.mlp.c_proj"] = RowwiseParallel()
    # HF GPT-2 uses Conv1D (weight stored transposed); swap the MLP to Linear first.
    for block in model.transformer.h:
        for name in ("c_fc", "c_proj"):
            conv = getattr(block.mlp, name)
            lin = torch.nn.Linear(conv.weight.shape[0], conv.weight.shape[1]).to(device)
            with torch.no_grad():
                lin.weight.copy_(conv.weight.t())
                lin.bias.copy_(conv.bias)
            setattr(block.mlp, name, lin)
    if order == "fixed":
        parallelize_module(model, mesh, plan)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    if order == "buggy":
        parallelize_module(model, mesh, plan)
    ids = torch.randint(0, cfg.vocab_size, (4, 256 if device == "cuda" else 16), device=device)
    times = []
    for _ in range(12):
        sync()
        t0 = time.perf_counter()
        opt.zero_grad()
        model(input_ids=ids, labels=ids).loss.backward()
        opt.step()
        sync()
        times.append(time.perf_counter() - t0)
    times = sorted(times[2:])
    allocated = torch.cuda.memory_allocated() if device == "cuda" else 0
    # What torch itself says the optimizer keeps alive outside the model.
    live = {p.to_local().untyped_storage().data_ptr() if hasattr(p, "to_local") else p.untyped_storage().data_ptr()
            for p in model.parameters()}
    stale = {}
    for group in opt.param_groups:
        for p in group["params"]:
            storage = p.untyped_storage()
            if storage.data_ptr() not in live:
                stale[storage.data_ptr()] = storage.nbytes()
    print(json.dumps({"rank": rank, "allocated": allocated, "stale_bytes": sum(stale.values()),
                      "median_ms": 1000 * times[len(times) // 2]}), flush=True)
    dist.destroy_process_group()


def check(tpaudit):
    import torch
    n = torch.cuda.device_count()
    if n < 2:
        print(f"skip: needs 2 GPUs, this machine has {n}")
        return 77
    results = {}
    for order in ("buggy", "fixed"):
        for tool in ("none", "tpaudit"):
            out = tempfile.mkdtemp()
            cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={n}",
                   __file__, "--child", order]
            if tool == "tpaudit":
                cmd = [tpaudit, "run", "-o", out, "--"] + cmd
            r = subprocess.run(cmd, capture_output=True, text=True)
            assert r.returncode == 0, r.stderr[-3000:]
            ranks = [json.loads(l) for l in r.stdout.splitlines() if l.startswith("{")]
            results[(order, tool)] = (out, ranks)
            print(order, tool, "median step ms:", [x["median_ms"] for x in ranks])
    for order in ("buggy", "fixed"):
        out, ranks = results[(order, "tpaudit")]
        doc = json.loads(subprocess.run([tpaudit, "report", "--format", "json", out], capture_output=True,
                                        text=True, check=True).stdout)
        by_rank = doc["totals"]["by_rank"]
        print(order, "retained by rank:", by_rank, "allocated:", [x["allocated"] for x in ranks])
        gate = subprocess.run([tpaudit, "gate", out], capture_output=True, text=True).returncode
        if order == "buggy":
            stale = [f for f in doc["findings"] if f["kind"] == "stale_param"]
            assert {f["rank"] for f in stale} == set(range(n)) and gate == 1
            for x in ranks:  # the report's retained bytes are what torch says the optimizer keeps outside the model
                assert by_rank[str(x["rank"])] == x["stale_bytes"] > 0, (by_rank, x)
                assert x["stale_bytes"] < x["allocated"]
        else:
            assert doc["findings"] == [] and gate == 0
    print("PASS dtensor on", n, "GPUs")
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        child(sys.argv[2])
    else:
        sys.exit(check(sys.argv[1]))
