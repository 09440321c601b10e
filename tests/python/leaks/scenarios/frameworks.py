"""Training with real packages on the CPU, each with a leak and a twin.

    python frameworks.py hf_trainer [--twin] [--steps N]
    python frameworks.py lightning [--twin] [--steps N]
    torchrun --nproc_per_node 2 frameworks.py ranks [--steps N]

hf_trainer: transformers' Trainer on a tiny GPT-2 (from GPT2Config) with a
  TrainerCallback that hooks the model at on_train_begin and keeps each
  step's logits with their graph in `self.outputs["logits"]`; the twin keeps
  `logits.argmax(-1).cpu()`.
lightning: a LightningModule that appends `outputs` (logits with graph) in
  training_step and validation_step and never clears them; the twin appends
  `loss.detach()` in training_step and clears its validation outputs in
  on_validation_epoch_end, as Lightning's documentation does.
ranks: two gloo ranks training DDP; rank 1 keeps each step's logits in a
  module-global list, rank 0 keeps argmax only.
Nothing here calls tpaudit.
"""
import argparse
import os

import torch
from torch import nn
from torch.nn import functional as F

VOCAB, SEQ, BATCH = 512, 16, 4
LOGITS_BYTES = BATCH * SEQ * VOCAB * 4


def tiny_gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel
    torch.manual_seed(0)
    cfg = GPT2Config(vocab_size=VOCAB, n_positions=SEQ, n_embd=32, n_layer=1, n_head=2)
    return GPT2LMHeadModel(cfg)


class TokenData(torch.utils.data.Dataset):
    def __len__(self):
        return 4096

    def __getitem__(self, i):
        ids = torch.randint(0, VOCAB, (SEQ,), generator=torch.Generator().manual_seed(i))
        return {"input_ids": ids, "labels": ids}


def hf_trainer(twin, steps, workdir):
    from transformers import Trainer, TrainerCallback, TrainingArguments

    class KeepOutputs(TrainerCallback):
        def __init__(self):
            self.outputs = {"logits": []}

        def on_train_begin(self, args, state, control, model=None, **kwargs):
            def keep(module, inputs, out):
                logits = out.logits
                self.outputs["logits"].append(logits.argmax(-1).cpu() if twin else logits)
            model.register_forward_hook(keep)

    args = TrainingArguments(output_dir=workdir, max_steps=steps, per_device_train_batch_size=BATCH,
                             use_cpu=True, report_to=[], save_strategy="no", logging_strategy="no",
                             disable_tqdm=True, dataloader_num_workers=0, learning_rate=1e-3)
    trainer = Trainer(model=tiny_gpt2(), args=args, train_dataset=TokenData(), callbacks=[KeepOutputs()])
    trainer.train()


def lightning(twin, steps, workdir):
    import lightning as L

    class LM(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.model = tiny_gpt2()
            self.train_outputs = []
            self.val_outputs = []

        def training_step(self, batch, batch_idx):
            out = self.model(**batch)
            self.train_outputs.append(out.loss.detach() if twin else out)
            return out.loss

        def validation_step(self, batch, batch_idx):
            out = self.model(**batch)
            self.val_outputs.append(out.logits)

        def on_validation_epoch_end(self):
            if twin:
                self.val_outputs.clear()

        def configure_optimizers(self):
            return torch.optim.AdamW(self.parameters(), lr=1e-3)

    loader = torch.utils.data.DataLoader(TokenData(), batch_size=BATCH)
    trainer = L.Trainer(max_steps=steps, accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, val_check_interval=4,
                        limit_val_batches=1, num_sanity_val_steps=0, default_root_dir=workdir)
    trainer.fit(LM(), loader, loader)


kept = []


def ranks(_twin, steps, _workdir):
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Embedding(VOCAB, 32), nn.Linear(32, VOCAB)))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for step in range(1, steps + 1):
        x = torch.randint(0, VOCAB, (BATCH, SEQ), generator=torch.Generator().manual_seed(step * 2 + rank))
        logits = model(x)  # made:rank_logits
        loss = F.cross_entropy(logits.flatten(0, 1), x.flatten())
        kept.append(logits if rank == 1 else logits.argmax(-1).cpu())
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("case", choices=["hf_trainer", "lightning", "ranks"])
    ap.add_argument("--twin", action="store_true")
    ap.add_argument("--steps", type=int, default=32)
    ap.add_argument("--workdir", default=os.getcwd())
    args = ap.parse_args()
    globals()[args.case](args.twin, args.steps, args.workdir)
    print("done", args.case, "twin" if args.twin else "leak", args.steps)
