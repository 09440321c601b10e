"""ColossalAI's HybridParallelPlugin with tensor parallelism on a GPT-2 built
from a config, the setting of the original bug report, run unmodified under
`tpaudit run` with torchrun (one process a rank):

    python -m torch.distributed.run --nproc_per_node 2 colossal_hybrid.py \
        fp32|bf16 tied|untied [--seed]

The optimizer is made on the plain model, then booster.boost shards the model
(TP = the world size) and wraps the optimizer: HybridParallelNaiveOptimizer
for fp32, HybridParallelAMPOptimizer (a MixedPrecisionOptimizer keeping
master_to_working_map) for bf16.  Three steps.

--seed puts the old GPT-2 policy back: its preprocess() padded the vocabulary
to a multiple of the TP size with resize_token_embeddings, which then made a
new embedding (and, untied, a new LM head) after the optimizer was built, so
the optimizer keeps the unsharded old table and the new sharded one is never
trained.

On a machine without a GPU, ColossalAI's CPU accelerator and gloo are used,
with two stand-ins set here at run time (ColossalAI itself is unchanged): its
CPU accelerator's get_rng_state/manual_seed (used by shardformer's dropout
randomizer) take the CPU generator, and torch.cuda.set_device (called by
gpt2_model_forward on the hidden states' device) ignores a CPU device.  On a
GPU nothing is changed; when there are fewer GPUs than ranks, the ranks share
GPU 0 and NCCL is told each rank is its own host (loopback sockets).

With ColossalAI 0.3.x (the seed's own release, tests/frameworks/test_seed_colossal.py)
the bug needs no --seed: that release's GPT-2 policy is the old one.  Its
tensor-spec dataclass has a default that Python 3.11's dataclasses refuse
(an unhashable _DistSpec), so on 3.11 that class is given object's hash
before ColossalAI is imported.  After boost each rank prints the bytes the
optimizer holds as trained tensors that are not the model's parameters
("stale by identity"), which every audit of a seeded run must retain.
"""
import os
import sys

import torch

PRECISION, TIE = sys.argv[1], sys.argv[2]
SEED = "--seed" in sys.argv
VOCAB = 1001  # not a multiple of the TP size: the old policy resized it


def old_release_stand_in():
    """ColossalAI 0.3.x's TensorSpec has `dist_attr: _DistSpec = _DistSpec(...)`;
    Python 3.11 refuses a dataclass default whose class has no __hash__."""
    import dataclasses
    get_field = dataclasses._get_field

    def hashable_dist_spec(cls, name, *args):
        default = cls.__dict__.get(name)
        if type(default).__name__ == "_DistSpec" and type(default).__hash__ is None:
            type(default).__hash__ = object.__hash__
        return get_field(cls, name, *args)

    dataclasses._get_field = hashable_dist_spec


def is_old_release():
    from importlib.metadata import version
    return tuple(int(x) for x in version("colossalai").split(".")[:2]) < (0, 4)


def stale_by_identity(model, optimizer):
    """Bytes of the tensors the optimizer trains (its groups' params, or a
    mixed-precision wrapper's working params) that are not the model's."""
    live = {id(p) for p in model.unwrap().parameters()}
    held = list(getattr(optimizer, "working_to_master_map", None) or
                (p for g in optimizer.param_groups for p in g["params"]))
    stale = {id(p): p for p in held if id(p) not in live}
    return sum(p.numel() * p.element_size() for p in stale.values())


def cpu_stand_ins():
    from colossalai.accelerator.cpu_accelerator import CpuAccelerator
    CpuAccelerator.get_rng_state = lambda self, device=None: torch.get_rng_state()
    CpuAccelerator.manual_seed = lambda self, seed: torch.manual_seed(seed)
    cuda_set_device = torch.cuda.set_device

    def set_device(device):
        if isinstance(device, torch.device) and device.type == "cpu":
            return
        cuda_set_device(device)

    torch.cuda.set_device = set_device


def launch():
    """colossalai.launch with the rank's device; returns the device."""
    import colossalai
    from colossalai.accelerator import set_accelerator
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ.get("LOCAL_RANK", rank))
    if torch.cuda.is_available():
        gpus = torch.cuda.device_count()
        if gpus < world:  # NCCL refuses two ranks of one communicator on one GPU
            os.environ["NCCL_HOSTID"] = "tpaudit-rank-%d" % rank
            for k, v in (("NCCL_SOCKET_IFNAME", "lo"), ("NCCL_NET", "Socket"), ("NCCL_P2P_DISABLE", "1"),
                         ("NCCL_SHM_DISABLE", "1"), ("NCCL_IB_DISABLE", "1"), ("NCCL_NVLS_ENABLE", "0"),
                         ("NCCL_MNNVL_ENABLE", "0")):
                os.environ.setdefault(k, v)
        local_rank %= gpus
        device = torch.device("cuda", local_rank)
    else:
        set_accelerator("cpu")
        cpu_stand_ins()
        device = torch.device("cpu")
    host, old = os.environ["MASTER_ADDR"], {}
    if is_old_release():  # 0.3.x asks for a config and writes tcp://[host]:port, which
        old = {"config": {}}  # Python 3.11's urlparse takes only for an IPv6 address
        host = "::1" if host in ("localhost", "127.0.0.1") else host
    colossalai.launch(**old, rank=rank, world_size=world, host=host, port=int(os.environ["MASTER_PORT"]),
                      local_rank=local_rank, verbose=False)
    return device


def resize_token_embeddings(model, vocab):
    """What resize_token_embeddings did in the transformers releases of the
    bug report: a new embedding (and, untied, a new LM head) holding the old
    rows, set on the model, then the weights tied again.  Releases since
    keep the embedding's Parameter and change its data."""
    old = model.get_input_embeddings()
    new = torch.nn.Embedding(vocab, old.embedding_dim, device=old.weight.device, dtype=old.weight.dtype)
    with torch.no_grad():
        new.weight[:old.num_embeddings] = old.weight
    model.set_input_embeddings(new)
    if not model.config.tie_word_embeddings:
        old_head = model.get_output_embeddings()
        head = torch.nn.Linear(old_head.in_features, vocab, bias=False, device=old_head.weight.device,
                               dtype=old_head.weight.dtype)
        with torch.no_grad():
            head.weight[:old_head.out_features] = old_head.weight
        model.set_output_embeddings(head)
    model.config.vocab_size = vocab
    model.tie_weights()


def old_gpt2_policy():
    """GPT2LMHeadModelPolicy with the preprocess() of the releases the bug was
    reported against: the vocabulary resized to a multiple of the TP size."""
    from colossalai.shardformer.policies.gpt2 import GPT2LMHeadModelPolicy

    class ResizingGPT2Policy(GPT2LMHeadModelPolicy):
        def preprocess(self):
            if self.shard_config.enable_tensor_parallelism:
                vocab = self.model.config.vocab_size
                tp = self.shard_config.tensor_parallel_size
                if vocab % tp:
                    resize_token_embeddings(self.model, vocab + tp - vocab % tp)
            return super().preprocess()

    return ResizingGPT2Policy()


def main():
    if is_old_release() and sys.version_info >= (3, 11):
        old_release_stand_in()
    device = launch()
    from colossalai.booster import Booster
    from colossalai.booster.plugin import HybridParallelPlugin
    from transformers import GPT2Config, GPT2LMHeadModel

    world = int(os.environ["WORLD_SIZE"])
    torch.manual_seed(0)
    config = GPT2Config(n_layer=2, n_embd=64, n_head=4, n_positions=64, vocab_size=VOCAB,
                        tie_word_embeddings=(TIE == "tied"), resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    model = GPT2LMHeadModel(config).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    plugin = HybridParallelPlugin(tp_size=world, pp_size=1, zero_stage=0, precision=PRECISION,
                                  enable_all_optimization=False, custom_policy=old_gpt2_policy() if SEED else None)
    model, optimizer, *_ = Booster(plugin=plugin).boost(model, optimizer)
    wte = model.unwrap().transformer.wte.weight
    say("rank %s: optimizer %s, wte %s %s" % (os.environ["RANK"], type(optimizer).__name__, tuple(wte.shape), wte.dtype))
    say("rank %s: stale by identity %d" % (os.environ["RANK"], stale_by_identity(model, optimizer)))
    generator = torch.Generator().manual_seed(1)
    for _ in range(3):
        ids = torch.randint(0, VOCAB, (2, 16), generator=generator).to(device)
        loss = model(input_ids=ids, attention_mask=torch.ones_like(ids), labels=ids).loss
        optimizer.backward(loss)
        optimizer.step()
        optimizer.zero_grad()
    say("rank %s: loss %.4f" % (os.environ["RANK"], float(loss)))


def say(line):
    """One line in one write: the ranks share the test's pipe, and print's text
    and newline, written apart, can interleave with another rank's line."""
    sys.stdout.flush()
    os.write(sys.stdout.fileno(), (line + "\n").encode())


if __name__ == "__main__":
    main()
