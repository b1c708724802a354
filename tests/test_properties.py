"""Properties the paper's design promises, checked through the whole model on random inputs."""
import pytest
import torch

from tests.conftest import random_batch
from transformer import Transformer, TransformerConfig

V = 30
VARIANTS = {
    "paper": {},
    "pre-norm": {"norm_first": True},
    "learned-positions": {"positional": "learned"},
    "untied": {"share_embeddings": False},
}


def make(variant="paper", src_vocab=V, tgt_vocab=V, **extra):
    cfg = TransformerConfig(N=2, d_model=32, d_ff=64, h=4, P_drop=0.0, max_len=64, **VARIANTS[variant], **extra)
    return Transformer(cfg, src_vocab, tgt_vocab).double().eval()


@pytest.mark.parametrize("variant", VARIANTS)
def test_future_target_tokens_do_not_change_earlier_logits(variant):
    model = make(variant)
    src, _ = random_batch(3, 8, V)
    tgt = torch.randint(1, V, (3, 10))
    logits = model(src, tgt)
    for t in range(1, 10):
        changed = tgt.clone()
        changed[:, t:] = torch.randint(1, V, (3, 10 - t))
        torch.testing.assert_close(model(src, changed)[:, :t], logits[:, :t], atol=1e-10, rtol=0)


@pytest.mark.parametrize("variant", VARIANTS)
def test_appending_source_padding_changes_nothing(variant):
    model = make(variant)
    src, _ = random_batch(3, 8, V)
    tgt, _ = random_batch(3, 6, V)
    padded = torch.cat([src, torch.zeros(3, 5, dtype=torch.long)], dim=1)
    torch.testing.assert_close(model(padded, tgt), model(src, tgt), atol=1e-10, rtol=0)


@pytest.mark.parametrize("variant", VARIANTS)
def test_a_sequence_does_not_depend_on_its_batch(variant):
    model = make(variant)
    src, src_len = random_batch(4, 9, V)
    tgt, tgt_len = random_batch(4, 7, V)
    batched = model(src, tgt)
    for i in range(4):
        s, t = src[i:i + 1, :src_len[i]], tgt[i:i + 1, :tgt_len[i]]
        alone = model(s, t)
        torch.testing.assert_close(batched[i:i + 1, :tgt_len[i]], alone, atol=1e-10, rtol=0)


@pytest.mark.parametrize("variant", VARIANTS)
def test_gradients_reach_every_parameter(variant):
    model = make(variant).train()
    src, _ = random_batch(4, 9, V)
    tgt, _ = random_batch(4, 7, V)
    logits = model(src, tgt)
    loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), torch.randint(1, V, (4 * 7,)))
    loss.backward()
    missing = [n for n, p in model.named_parameters() if p.grad is None or not p.grad.abs().sum() > 0]
    assert not missing, f"no gradient reaches {missing}"


def test_all_padding_source_gives_finite_outputs_and_gradients():
    model = make().train()
    src = torch.tensor([[5, 6, 7], [0, 0, 0]])
    tgt = torch.tensor([[1, 4, 5], [1, 8, 0]])
    logits = model(src, tgt)
    assert torch.isfinite(logits).all()
    logits.sum().backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters())


def test_weight_sharing():
    three_way = make()
    assert three_way.src_embed.lut.weight is three_way.tgt_embed.lut.weight is three_way.generator.proj.weight
    two_way = make(src_vocab=V, tgt_vocab=V + 5)
    assert two_way.tgt_embed.lut.weight is two_way.generator.proj.weight
    assert two_way.src_embed.lut.weight is not two_way.tgt_embed.lut.weight
    untied = make("untied")
    assert len({id(m.weight) for m in (untied.src_embed.lut, untied.tgt_embed.lut, untied.generator.proj)}) == 3
    # sharing saves exactly two vocabulary matrices
    assert untied.num_parameters() - three_way.num_parameters() == 2 * V * 32


def test_dropout_is_active_in_training_only():
    cfg = TransformerConfig(N=1, d_model=32, d_ff=64, h=4, P_drop=0.5)
    model = Transformer(cfg, V, V)
    src, tgt = torch.randint(1, V, (2, 5)), torch.randint(1, V, (2, 4))
    model.train()
    assert not torch.allclose(model(src, tgt), model(src, tgt))
    model.eval()
    torch.testing.assert_close(model(src, tgt), model(src, tgt))


def test_encode_decode_equals_forward():
    model = make()
    src, _ = random_batch(2, 6, V)
    tgt, _ = random_batch(2, 5, V)
    torch.testing.assert_close(model.decode(tgt, model.encode(src), src), model(src, tgt))
