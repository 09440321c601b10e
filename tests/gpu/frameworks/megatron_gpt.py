"""Megatron-core on one GPU (torchrun --nproc_per_node 1): a GPTModel with
the local layer spec, bf16, Float16Module, Megatron's DistributedDataParallel
and get_megatron_optimizer, three steps.  argv: plain | dist (the distributed
optimizer); --seed replaces the final layernorm with a copy after the
optimizer was built."""
import copy
import sys

import torch


def main():
    dist_opt = sys.argv[1] == "dist"
    from megatron.core import parallel_state
    from megatron.core.distributed import DistributedDataParallel, DistributedDataParallelConfig
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.models.gpt.gpt_model import GPTModel
    from megatron.core.optimizer import OptimizerConfig, get_megatron_optimizer
    from megatron.core.tensor_parallel.random import model_parallel_cuda_manual_seed
    from megatron.core.transformer.module import Float16Module
    from megatron.core.transformer.transformer_config import TransformerConfig
    torch.distributed.init_process_group("nccl")
    torch.cuda.set_device(0)
    parallel_state.initialize_model_parallel(1, 1)
    model_parallel_cuda_manual_seed(0)
    cfg = TransformerConfig(num_layers=2, hidden_size=64, num_attention_heads=4, use_cpu_initialization=True,
                            bf16=True, params_dtype=torch.bfloat16, pipeline_dtype=torch.bfloat16)
    gpt = GPTModel(config=cfg, transformer_layer_spec=get_gpt_layer_local_spec(), vocab_size=128,
                   max_sequence_length=32).cuda()
    model = Float16Module(cfg, gpt)
    ddp = DistributedDataParallel(cfg, DistributedDataParallelConfig(use_distributed_optimizer=dist_opt,
                                                                     grad_reduce_in_fp32=True), model)
    opt = get_megatron_optimizer(OptimizerConfig(optimizer="adam", lr=1e-4, bf16=True,
                                                 use_distributed_optimizer=dist_opt), [ddp])
    print("optimizer", type(opt).__name__, flush=True)
    if "--seed" in sys.argv:
        gpt.decoder.final_layernorm = copy.deepcopy(gpt.decoder.final_layernorm)
    s = 32
    mask = torch.ones(1, 1, s, s, device="cuda").tril() < 0.5
    pos = torch.arange(s, device="cuda").unsqueeze(0)
    for _ in range(3):
        ids = torch.randint(0, 128, (2, s), device="cuda")
        ddp.zero_grad_buffer()
        opt.zero_grad()
        loss = ddp(ids, pos, mask, labels=ids).float().mean()
        loss.backward()
        ddp.finish_grad_sync()
        opt.step()
    print("loss", float(loss.detach()))
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
