"""A short fine-tuning run with the seed bug's mechanism, for tpaudit's demo.

A tiny GPT-style language model is built with GPT-2's vocabulary (50257),
an AdamW optimizer is built over it, and then a "tensor-parallel policy"
pads the vocabulary to a multiple of the TP degree by creating a new, larger
embedding, as ColossalAI's shardformer did with `resize_token_embeddings` (README).

--order buggy   optimizer first, then the policy: the optimizer keeps the
                old 50257-row table alive and never trains the new one.
--order fixed   the policy first, then the optimizer: nothing is stale.

Runs on the GPU when there is one, on the CPU otherwise.
"""
import argparse

import torch
from torch import nn


class TinyLM(nn.Module):
    def __init__(self, vocab, channels, seq):
        super().__init__()
        self.wte = nn.Embedding(vocab, channels)
        self.wpe = nn.Embedding(seq, channels)
        self.block = nn.TransformerEncoderLayer(channels, 4, 4 * channels, batch_first=True)
        self.ln_f = nn.LayerNorm(channels)

    def forward(self, idx):
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        x = self.ln_f(self.block(x, is_causal=True,
                                 src_mask=nn.Transformer.generate_square_subsequent_mask(idx.shape[1], device=idx.device)))
        return x @ self.wte.weight.t()


def pad_vocab(model, tp_size):
    """The policy's preprocess step: a new, padded embedding replaces the old one."""
    old = model.wte
    vocab = old.num_embeddings
    if vocab % tp_size == 0:
        return
    padded = vocab + tp_size - vocab % tp_size
    new = nn.Embedding(padded, old.embedding_dim, device=old.weight.device)
    with torch.no_grad():
        new.weight[:vocab] = old.weight
    model.wte = new


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--order", choices=["buggy", "fixed"], default="buggy")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--tp", type=int, default=4)
    parser.add_argument("--channels", type=int, default=64)
    parser.add_argument("--seq", type=int, default=32)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args()

    torch.manual_seed(0)
    model = TinyLM(50257, args.channels, args.seq).to(args.device)
    if args.order == "buggy":
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
        pad_vocab(model, args.tp)
    else:
        pad_vocab(model, args.tp)
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)

    data = torch.randint(0, 50257, (4, args.seq + 1), device=args.device)
    for step in range(1, args.steps + 1):
        logits = model(data[:, :-1])
        loss = nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), data[:, 1:].reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(f"step {step}: loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
