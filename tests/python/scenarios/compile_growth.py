"""compile_growth.py CASE - HF GPT2LMHeadModel (2 layers, from a config)
trained on the CPU while a list keeps each step's logits, the leak people
write; CASE eager trains the model as it is, compiled through
torch.compile(model) (inductor), forward through torch.compile(model.forward)
(no eager module call at all), model_zero_grad through torch.compile(model)
with the gradients cleared by model.zero_grad (no Optimizer.zero_grad),
bounded the compiled loop that keeps the last two steps only (the twin).
test_compile.py checks that the growth finding under compile names the same
holder and the same lines of this file as in eager mode, not inductor's
generated code."""
import sys

import torch
from transformers import GPT2Config, GPT2LMHeadModel

STEPS = 24


def main(case):
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=2048, n_positions=64, n_embd=64, n_layer=2, n_head=4))
    run = {"eager": model, "forward": torch.compile(model.forward)}.get(case) or torch.compile(model)
    clear = model.zero_grad if case == "model_zero_grad" else None
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    kept = []
    for step in range(STEPS):
        x = torch.randint(0, 2048, (4, 32))
        out = run(x, labels=x)  # growth-line: forward
        out.loss.backward()
        opt.step()
        (clear or opt.zero_grad)(set_to_none=True)
        kept.append(out.logits)  # growth-line: kept
        if case == "bounded":
            del kept[:-2]
    print("loss %.4f" % out.loss.item())
    return kept


if __name__ == "__main__":
    kept = main(sys.argv[1])
