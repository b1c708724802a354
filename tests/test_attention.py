"""Scaled dot-product and multi-head attention: the fused path against the written-out equation and
against torch.nn.MultiheadAttention; masks; rows that may see nothing."""
import pytest
import torch
from torch import nn

from tests.conftest import random_batch
from transformer import MultiHeadAttention, attention, causal_mask, decoder_mask, padding_mask


def explicit_mha(mha, x_q, x_kv, mask):
    q, k, v = mha.project(x_q, x_kv)
    heads, _ = attention(q, k, v, mask)
    return mha.out_proj(mha.merge_heads(heads))


@pytest.mark.parametrize("h,d_k,d_v", [(4, None, None), (2, 8, 24), (1, None, None)])
@pytest.mark.parametrize("self_attention", [True, False])
def test_fused_agrees_with_explicit_formula(h, d_k, d_v, self_attention):
    mha = MultiHeadAttention(32, h, d_k, d_v).double()
    src, _ = random_batch(4, 9, 50)
    x_kv = torch.randn(4, 9, 32, dtype=torch.float64)
    x_q = x_kv if self_attention else torch.randn(4, 6, 32, dtype=torch.float64)
    mask = padding_mask(src, 0)
    if self_attention:
        mask = mask & causal_mask(9)
    torch.testing.assert_close(mha(x_q, x_kv, mask), explicit_mha(mha, x_q, x_kv, mask), atol=1e-10, rtol=0)


def test_matches_torch_multihead_attention():
    d_model, h = 32, 4
    ours = MultiHeadAttention(d_model, h).double()
    ref = nn.MultiheadAttention(d_model, h, batch_first=True).double()
    with torch.no_grad():
        ref.in_proj_weight.copy_(ours.in_proj.weight)
        ref.in_proj_bias.copy_(ours.in_proj.bias)
        ref.out_proj.weight.copy_(ours.out_proj.weight)
        ref.out_proj.bias.copy_(ours.out_proj.bias)
    ids, _ = random_batch(3, 7, 20)
    x, mem = torch.randn(3, 5, d_model, dtype=torch.float64), torch.randn(3, 7, d_model, dtype=torch.float64)
    want, _ = ref(x, mem, mem, key_padding_mask=ids == 0, need_weights=False)
    torch.testing.assert_close(ours(x, mem, padding_mask(ids, 0)), want, atol=1e-10, rtol=0)


def test_weights_are_distributions_that_respect_the_mask():
    q, k, v = torch.randn(2, 5, 8), torch.randn(2, 7, 8), torch.randn(2, 7, 3)
    ids = torch.tensor([[1, 2, 3, 4, 5, 0, 0], [1, 2, 0, 0, 0, 0, 0]])
    _, w = attention(q, k, v, padding_mask(ids, 0)[:, 0])
    torch.testing.assert_close(w.sum(-1), torch.ones(2, 5))
    assert (w[0, :, 5:] == 0).all() and (w[1, :, 2:] == 0).all()


def test_masks():
    tgt = torch.tensor([[5, 6, 7, 0]])
    m = decoder_mask(tgt, 0)
    assert m.shape == (1, 1, 4, 4) and m.dtype == torch.bool
    expected = torch.tensor([[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 0]], dtype=torch.bool)
    assert torch.equal(m[0, 0], expected)


@pytest.mark.parametrize("implementation", ["explicit", "fused"])
def test_query_that_sees_nothing_is_finite_with_finite_gradients(implementation):
    mha = MultiHeadAttention(16, 2)
    x = torch.randn(2, 4, 16, requires_grad=True)
    ids = torch.tensor([[3, 4, 5, 6], [0, 0, 0, 0]])   # the second sentence is all padding
    mask = padding_mask(ids, 0)
    out = mha(x, x, mask) if implementation == "fused" else explicit_mha(mha, x, x, mask)
    assert torch.isfinite(out).all()
    out.sum().backward()
    assert torch.isfinite(x.grad).all()
    assert all(torch.isfinite(p.grad).all() for p in mha.parameters())


def test_d_model_not_divisible_by_h_is_rejected():
    with pytest.raises(ValueError, match="not divisible"):
        MultiHeadAttention(30, 4)


def test_attention_weights_are_the_ones_the_module_uses():
    mha = MultiHeadAttention(16, 4).double()
    x, mem = torch.randn(2, 3, 16, dtype=torch.float64), torch.randn(2, 5, 16, dtype=torch.float64)
    ids = torch.tensor([[1, 2, 3, 4, 5], [1, 2, 3, 0, 0]])
    w = mha.attention_weights(x, mem, padding_mask(ids, 0))
    assert w.shape == (2, 4, 3, 5)
    torch.testing.assert_close(w.sum(-1), torch.ones(2, 4, 3, dtype=torch.float64))
    _, _, v = mha.project(x, mem)
    rebuilt = mha.out_proj(mha.merge_heads(w @ v))
    torch.testing.assert_close(rebuilt, mha(x, mem, padding_mask(ids, 0)), atol=1e-10, rtol=0)


# ------------------------------------------- rows that see nothing, dropout, cache --

def test_a_query_row_that_sees_nothing_outputs_zero_while_the_others_attend():
    torch.manual_seed(0)
    q, k, v = torch.randn(1, 3, 4), torch.randn(1, 2, 4), torch.randn(1, 2, 4)
    mask = torch.tensor([[[True, True], [False, False], [True, False]]])   # [1, 3, 2]: row 1 sees no key
    out, weights = attention(q, k, v, mask)
    assert torch.equal(out[0, 1], torch.zeros(4)) and torch.equal(weights[0, 1], torch.zeros(2))
    torch.testing.assert_close(out[0, 2], v[0, 0])
    mha = MultiHeadAttention(8, 2)
    x, y = torch.randn(1, 3, 8), torch.randn(1, 2, 8)
    got = mha(x, y, mask)
    # before W^O the empty row is 0, so after it only the output bias remains
    torch.testing.assert_close(got[0, 1], mha.out_proj.bias.detach())
    assert torch.isfinite(got).all()


def test_explicit_attention_applies_the_dropout_it_is_given():
    torch.manual_seed(0)
    q = k = v = torch.randn(2, 6, 4)
    plain, w = attention(q, k, v)
    dropped, w_drop = attention(q, k, v, dropout=torch.nn.Dropout(0.5).train())
    kept = w_drop != 0
    assert 0 < kept.float().mean() < 1
    torch.testing.assert_close(w_drop[kept], w[kept] * 2)
    torch.testing.assert_close(dropped, w_drop @ v)


def test_attention_dropout_acts_in_training_only():
    torch.manual_seed(0)
    mha = MultiHeadAttention(16, 2, attn_drop=0.5)
    x = torch.randn(2, 7, 16)
    mha.eval()
    clean = mha(x, x)
    torch.testing.assert_close(mha(x, x), clean)                    # deterministic in evaluation
    no_drop = MultiHeadAttention(16, 2)
    no_drop.load_state_dict(mha.state_dict())
    torch.testing.assert_close(no_drop.eval()(x, x), clean)          # and equal to no dropout at all
    mha.train()
    a, b = mha(x, x), mha(x, x)
    assert not torch.allclose(a, clean) and not torch.allclose(a, b)


def test_cached_cross_attention_reuses_the_memory_keys_with_all_biases():
    torch.manual_seed(0)
    mha = MultiHeadAttention(16, 2)
    with torch.no_grad():
        mha.in_proj.bias.normal_()                                     # the model starts them at 0
    memory, y = torch.randn(2, 5, 16), torch.randn(2, 3, 16)
    cache = {}
    first = mha(y[:, :1], memory, cache=cache)
    torch.testing.assert_close(first, mha(y[:, :1], memory))
    # the second step reads keys and values from the cache: a different memory no longer matters
    second = mha(y[:, 1:2], torch.zeros_like(memory), cache=cache)
    torch.testing.assert_close(second, mha(y[:, 1:2], memory))


def test_masks_are_made_on_the_ids_device():
    ids = torch.tensor([[5, 6, 0]], device="meta")
    assert causal_mask(3, ids.device).device.type == "meta"
    assert decoder_mask(ids, 0).device.type == "meta"
