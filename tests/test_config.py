"""Presets reproduce the paper's configurations (Table 3) and parameter counts follow from them."""
import pytest
import torch

from transformer import PRESETS, Transformer, TransformerConfig

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
