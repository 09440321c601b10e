"""The vocabulary padded after the optimizer was built, with today's
transformers: does the optimizer still hold the model's parameters?

--case lm-head    (default) GPT-2 with an untied LM head, then
                  resize_token_embeddings(50260): transformers 5 resizes the input
                  embedding in place but builds a new lm_head, so AdamW keeps the old
                  [50257, C] head alive and never trains the new one.
--case set-input  a new, padded nn.Embedding put in with set_input_embeddings (what a
                  tensor-parallel policy does): the old table stays in AdamW.
--case tied       GPT-2 as shipped (tied weights), then resize_token_embeddings(50260):
                  transformers 5 keeps the Parameter and changes its data, so nothing is
                  stale (tpaudit says clean).

A tiny model built from a config (nothing is downloaded), one step on the CPU:
    tpaudit run -- python examples/resize_after_optimizer.py
"""
import argparse

import torch
from torch import nn
from transformers import GPT2Config, GPT2LMHeadModel

VOCAB, PADDED = 50257, 50260  # GPT-2's vocabulary, padded to a multiple of 4 (the TP degree)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", choices=["lm-head", "set-input", "tied"], default="lm-head")
    args = parser.parse_args()

    torch.manual_seed(0)
    config = GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=VOCAB, tie_word_embeddings=args.case != "lm-head")
    model = GPT2LMHeadModel(config)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)

    if args.case == "set-input":
        new = nn.Embedding(PADDED, config.n_embd)
        with torch.no_grad():
            new.weight[:VOCAB] = model.get_input_embeddings().weight
        model.set_input_embeddings(new)
        model.config.vocab_size = PADDED
        model.tie_weights()  # the LM head shares the new table
    else:
        model.resize_token_embeddings(PADDED, mean_resizing=False)

    batch = torch.randint(0, VOCAB, (2, 16))
    model(batch, labels=batch).loss.backward()
    optimizer.step()
    print(f"{args.case}: one step done")


if __name__ == "__main__":
    main()
