"""Presets reproduce the paper's configurations (Table 3) and parameter counts follow from them."""
import pytest
import torch

from transformer import PRESETS, MultiHeadAttention, Transformer, TransformerConfig

# Table 3 of the paper: the fields each row changes relative to the base model.
TABLE3 = {
    "A1": dict(h=1, d_k=512, d_v=512), "A2": dict(h=4, d_k=128, d_v=128),
    "A3": dict(h=16, d_k=32, d_v=32), "A4": dict(h=32, d_k=16, d_v=16),
    "B1": dict(d_k=16), "B2": dict(d_k=32),
    "C1": dict(N=2), "C2": dict(N=4), "C3": dict(N=8),
    "C4": dict(d_model=256, d_k=32, d_v=32), "C5": dict(d_model=1024, d_k=128, d_v=128),
    "C6": dict(d_ff=1024), "C7": dict(d_ff=4096),
    "D1": dict(P_drop=0.0), "D2": dict(P_drop=0.2), "D3": dict(eps_ls=0.0), "D4": dict(eps_ls=0.2),
    "E": dict(positional="learned"),
}
BASE = dict(N=6, d_model=512, d_ff=2048, h=8, d_k=64, d_v=64, P_drop=0.1, eps_ls=0.1, positional="sinusoidal",
            train_steps=100_000)


def test_base_and_big_are_the_papers():
    assert TransformerConfig.preset("base") == TransformerConfig(**BASE)
    big = TransformerConfig.preset("big")
    assert (big.N, big.d_model, big.d_ff, big.h, big.d_k, big.d_v, big.P_drop, big.eps_ls, big.train_steps) == \
        (6, 1024, 4096, 16, 64, 64, 0.3, 0.1, 300_000)
    assert TransformerConfig() == TransformerConfig.preset("base")   # defaults are the base model
    assert not TransformerConfig().norm_first                         # post-norm, as in the paper


@pytest.mark.parametrize("row", TABLE3)
def test_every_table3_row(row):
    assert TransformerConfig.preset(row) == TransformerConfig(**{**BASE, **TABLE3[row]})


def test_every_preset_is_listed():
    assert set(TransformerConfig.presets()) == set(TABLE3) | {"base", "big", "small", "tiny"} == set(PRESETS)


def test_overrides_rederive_head_widths():
    assert TransformerConfig.preset("base", h=16).d_k == 32
    assert TransformerConfig.preset("base", h=16, d_k=8).d_k == 8
    assert TransformerConfig.preset("base", P_drop=0.3).P_drop == 0.3


def expected_base_parameters(V, d=512, d_ff=2048, N=6):
    attn = 4 * (d * d + d)
    ffn = d * d_ff + d_ff + d_ff * d + d
    return V * d + N * (attn + ffn + 2 * 2 * d) + N * (2 * attn + ffn + 3 * 2 * d)


def test_base_parameter_count_matches_the_formula():
    with torch.device("meta"):
        model = Transformer(TransformerConfig.preset("base"), 37000, 37000)
    assert model.num_parameters() == expected_base_parameters(37000)


def test_the_model_is_wired_from_its_config():
    cfg = TransformerConfig(N=1, d_model=16, d_ff=32, h=2, d_k=5, d_v=3, attn_drop=0.2, layer_norm_eps=1e-3,
                            positional="learned", max_len=20)
    for norm_first in (False, True):
        model = Transformer(TransformerConfig(**{**cfg.__dict__, "norm_first": norm_first}), 30)
        attn = [m for m in model.modules() if isinstance(m, MultiHeadAttention)]
        assert len(attn) == 3 and all((a.d_k, a.d_v, a.attn_drop) == (5, 3, 0.2) for a in attn)
        norms = [m for m in model.modules() if isinstance(m, torch.nn.LayerNorm)]
        assert len(norms) == 5 + 2 * norm_first and all(n.eps == 1e-3 for n in norms)
        assert model.src_pos.table.num_embeddings == model.tgt_pos.table.num_embeddings == 20


def test_layers_default_to_the_paper_s_settings():
    from transformer.layers import DecoderLayer, EncoderLayer, SublayerConnection
    attn, ffn = MultiHeadAttention(8, 2), torch.nn.Linear(8, 8)
    layers = [SublayerConnection(8), *EncoderLayer(8, attn, ffn).sublayers, *DecoderLayer(8, attn, attn, ffn).sublayers]
    for s in layers:
        assert (s.dropout.p, s.norm.eps, s.norm_first) == (0.1, 1e-6, False)
    assert EncoderLayer(8, attn, ffn, eps=1e-3).sublayers[0].norm.eps == 1e-3
    assert DecoderLayer(8, attn, attn, ffn, eps=1e-3).sublayers[2].norm.eps == 1e-3


def test_initial_weights_have_the_stated_spread():
    """Embeddings, output layer and learned positions start as N(0, 1/d_model)."""
    from transformer.embeddings import Embeddings, OutputProjection
    from transformer.positional import LearnedPositionalEmbedding
    torch.manual_seed(0)
    d = 64
    for w in (Embeddings(2000, d).lut.weight, OutputProjection(d, 2000).proj.weight,
              LearnedPositionalEmbedding(d, 2000).table.weight):
        assert abs(w.mean().item()) < 0.005 and abs(w.std().item() - d ** -0.5) < 0.005
    assert OutputProjection(d, 10).proj.bias is None


def test_changing_width_or_heads_alone_rederives_both_head_widths():
    c = TransformerConfig.preset("base", d_model=256)
    assert (c.d_k, c.d_v) == (32, 32)
    c = TransformerConfig.preset("base", h=4)
    assert (c.d_k, c.d_v) == (128, 128)
