"""The plugin's growth limit on a real model: HF GPT-2 (2 layers, vocabulary
8192, built from its config) trained for 30 steps, each step's logits
(4 x 128 x 8192 float32, 16 MiB) kept in a list that lives in the test
body, in a helper the test calls (whose optimizer is gone when the test
ends) and in a fixture; each beside its bounded twin, which keeps only the
loss as a float.  Every test carries @pytest.mark.tpaudit(max_growth="1MiB"):
the leaks fail with MEMORY GROWTH, the twins pass."""
import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel

STEPS = 30
BATCH, SEQ, VOCAB = 4, 128, 8192
LIMIT = pytest.mark.tpaudit(max_growth="1MiB")


def model_and_optimizer():
    torch.manual_seed(0)
    config = GPT2Config(n_layer=2, n_head=2, n_embd=64, vocab_size=VOCAB, n_positions=SEQ)
    model = GPT2LMHeadModel(config)
    return model, torch.optim.AdamW(model.parameters(), lr=1e-4)


def batch(step):
    return torch.randint(0, VOCAB, (BATCH, SEQ), generator=torch.Generator().manual_seed(step))


def learn(out, optimizer):
    """The rest of a step once its output is out: backward and the optimizer's step."""
    out.loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def train(keep):
    """30 steps of GPT-2; keep(out) is given each step's output."""
    model, optimizer = model_and_optimizer()
    for step in range(STEPS):
        x = batch(step)
        out = model(x, labels=x)  # made:helper
        keep(out)
        learn(out, optimizer)


@pytest.fixture
def kept_logits():
    return []


@LIMIT
def test_body_keeps_logits():
    model, optimizer = model_and_optimizer()
    kept = []
    for step in range(STEPS):
        x = batch(step)
        out = model(x, labels=x)  # made:body
        kept.append(out.logits)
        learn(out, optimizer)
    assert len(kept) == STEPS


@LIMIT
def test_body_twin():
    model, optimizer = model_and_optimizer()
    losses = []
    for step in range(STEPS):
        x = batch(step)
        out = model(x, labels=x)
        losses.append(out.loss.item())
        learn(out, optimizer)
    assert len(losses) == STEPS


@LIMIT
def test_helper_keeps_logits():
    kept = []
    train(lambda out: kept.append(out.logits))
    assert len(kept) == STEPS


@LIMIT
def test_helper_twin():
    losses = []
    train(lambda out: losses.append(out.loss.item()))
    assert len(losses) == STEPS


@LIMIT
def test_fixture_keeps_logits(kept_logits):
    train(lambda out: kept_logits.append(out.logits))
    assert len(kept_logits) == STEPS


@LIMIT
def test_fixture_twin(kept_logits):
    train(lambda out: kept_logits.append(out.loss.item()))
    assert len(kept_logits) == STEPS
