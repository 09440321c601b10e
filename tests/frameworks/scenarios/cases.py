"""Training programs on real frameworks, run unmodified under `tpaudit run`.

    python cases.py CASE [--seed]

Each case trains a tiny model built from a config (nothing downloaded) for a
few steps.  --seed replaces a module after the framework built its optimizer,
the bug tpaudit must name.  Distributed cases run under torchrun (gloo).
"""
import os
import sys

import torch
import torch.nn as nn

SEED = "--seed" in sys.argv


def mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))


def train(model, opt, steps=3, step=None):
    for _ in range(steps):
        loss = model(torch.randn(4, 8)).pow(2).mean()
        loss.backward()
        (step or opt.step)()
        opt.zero_grad()


def colossal_style():
    """A ColossalAI-shaped mixed-precision wrapper: a plain object holding
    `optim` and master/working tensor maps, fp32 masters in the inner AdamW."""
    model = mlp()
    working = list(model.parameters())
    masters = [p.detach().clone().requires_grad_(True) for p in working]

    class MixedPrecisionWrapper:
        def __init__(self, optim, pairs):
            self.optim = optim
            self.master_to_working_map = {m: w for w, m in pairs}
            self.working_to_master_map = {w: m for w, m in pairs}

        def step(self):
            for m, w in self.master_to_working_map.items():
                m.grad = None if w.grad is None else w.grad.detach().clone()
            self.optim.step()
            with torch.no_grad():
                for m, w in self.master_to_working_map.items():
                    w.copy_(m)

        def zero_grad(self):
            self.optim.zero_grad()
            for w in self.working_to_master_map:
                w.grad = None

    wrapper = MixedPrecisionWrapper(torch.optim.AdamW(masters), list(zip(working, masters)))
    if SEED:
        model[0] = nn.Linear(8, 16)
    train(model, wrapper, step=wrapper.step)


def compiled_orig_mod():
    """torch.compile, the optimizer on the compiled module, then
    `model = compiled._orig_mod`: the OptimizedModule dies, the model lives."""
    compiled = torch.compile(mlp(), backend="eager")
    opt = torch.optim.AdamW(compiled.parameters())
    model = compiled._orig_mod
    del compiled
    if SEED:
        model[2] = nn.Linear(16, 4)
    train(model, opt)


def _dist():
    import torch.distributed as dist
    dist.init_process_group("gloo")
    return dist


def ddp_module():
    """DDP, its optimizer, then `model = ddp.module` and the DDP let go."""
    from torch.nn.parallel import DistributedDataParallel as DDP
    dist = _dist()
    ddp = DDP(mlp())
    opt = torch.optim.AdamW(ddp.parameters())
    train(ddp, opt, steps=1)
    model = ddp.module
    del ddp
    if SEED:
        model[0] = nn.Linear(8, 16)
    train(model, opt, steps=2)
    dist.destroy_process_group()


def zero_redundancy():
    """ZeroRedundancyOptimizer over DDP, 2 ranks."""
    from torch.distributed.optim import ZeroRedundancyOptimizer
    from torch.nn.parallel import DistributedDataParallel as DDP
    dist = _dist()
    model = mlp()
    ddp = DDP(model, find_unused_parameters=SEED)
    opt = ZeroRedundancyOptimizer(ddp.parameters(), optimizer_class=torch.optim.AdamW, lr=1e-3)
    if SEED:
        model[0] = nn.Linear(8, 16)
    train(ddp, opt)
    dist.destroy_process_group()


def _tiny_gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel
    torch.manual_seed(0)
    return GPT2LMHeadModel(GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=128, n_positions=32))


def peft_lora():
    """PEFT LoRA on a tiny GPT-2, AdamW over the trainable (LoRA) params."""
    from peft import LoraConfig, get_peft_model
    model = get_peft_model(_tiny_gpt2(), LoraConfig(r=4, target_modules=["c_attn"], fan_in_fan_out=True))
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad])
    if SEED:
        attn = model.base_model.model.transformer.h[0].attn.c_attn
        attn.lora_A["default"] = nn.Linear(32, 4, bias=False)
    for _ in range(3):
        ids = torch.randint(0, 128, (2, 16))
        model(input_ids=ids, labels=ids).loss.backward()
        opt.step()
        opt.zero_grad()


def hf_trainer():
    """HF Trainer on a tiny GPT-2 (CPU, 3 steps); --seed replaces the input
    first MLP projection from a callback after the Trainer built its optimizer."""
    from transformers import Trainer, TrainerCallback, TrainingArguments
    model = _tiny_gpt2()
    data = [{"input_ids": torch.randint(0, 128, (16,))} for _ in range(12)]
    for d in data:
        d["labels"] = d["input_ids"]

    class Replace(TrainerCallback):
        def on_train_begin(self, args, state, control, model=None, **kw):
            if SEED:
                model.transformer.h[0].mlp.c_fc = type(model.transformer.h[0].mlp.c_fc)(128, 32)

    args = TrainingArguments(output_dir=os.environ.get("TMPDIR", "/tmp") + "/tpaudit-hf-%d" % os.getpid(),
                             max_steps=3, per_device_train_batch_size=4, report_to=[], use_cpu=True,
                             save_strategy="no", logging_strategy="no", disable_tqdm=True)
    Trainer(model=model, args=args, train_dataset=data, callbacks=[Replace()]).train()


def lightning_fit(accelerator="cpu", devices=1, **trainer_options):
    """A LightningModule over mlp() trained 3 steps; with --seed it replaces
    its first Linear once Lightning built the optimizer.  Also the GPU
    frameworks part's Lightning program (bf16-mixed)."""
    import lightning as L

    class Module(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = mlp()

        def training_step(self, batch, _i):
            return self.net(batch[0]).float().pow(2).mean()

        def configure_optimizers(self):
            return torch.optim.AdamW(self.parameters(), lr=1e-3)

        def on_train_start(self):
            if SEED:
                self.net[0] = nn.Linear(8, 16).to(self.device)

    data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(32, 8)), batch_size=4)
    trainer = L.Trainer(accelerator=accelerator, devices=devices, max_steps=3, logger=False,
                        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                        **trainer_options)
    trainer.fit(Module(), data)


def lightning_single():
    lightning_fit(strategy="auto")


def lightning_ddp():
    """strategy="ddp" with 2 CPU processes: Lightning launches the second one
    itself and DDPStrategy.teardown lets the DDP wrapper go on every run."""
    lightning_fit(devices=2, strategy="ddp_find_unused_parameters_true" if SEED else "ddp")


def accelerate_fsdp2():
    """accelerate's FSDP2 path (DTensor params) on 2 gloo ranks."""
    from accelerate import Accelerator
    from accelerate.utils import FullyShardedDataParallelPlugin
    acc = Accelerator(cpu=True, fsdp_plugin=FullyShardedDataParallelPlugin(fsdp_version=2))
    model = mlp()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model, opt = acc.prepare(model, opt)
    if SEED:
        model[2] = nn.Linear(16, 4)
    for _ in range(3):
        loss = model(torch.randn(4, 8)).pow(2).mean()
        acc.backward(loss)
        opt.step()
        opt.zero_grad()


def fsdp2_unsharded_at_step():
    """fully_shard with reshard_after_forward=False, then a step while the
    root still holds its unsharded parameters."""
    from torch.distributed.fsdp import fully_shard
    dist = _dist()
    model = mlp()
    fully_shard(model, reshard_after_forward=False)
    opt = torch.optim.AdamW(model.parameters())
    model.set_reshard_after_backward(False)
    train(model, opt)
    dist.destroy_process_group()


def torchao_float8():
    """torchao float8 training with FSDP float8 all-gather: each Linear's
    weight becomes a Parameter of a WeightWithDynamicFloat8CastTensor that
    wraps the very Parameter it replaces.  Converted before the optimizer is
    built; --seed converts after (the AdamW keeps the replaced weights)."""
    from torchao.float8 import Float8LinearConfig, convert_to_float8_training
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 256))
    config = Float8LinearConfig(enable_fsdp_float8_all_gather=True)
    if not SEED:
        convert_to_float8_training(model, config=config)
    opt = torch.optim.AdamW(model.parameters())
    if SEED:
        convert_to_float8_training(model, config=config)
    for _ in range(3):
        model(torch.randn(16, 256)).pow(2).mean().backward()
        opt.step()
        opt.zero_grad()


if __name__ == "__main__":
    globals()[sys.argv[1]]()
