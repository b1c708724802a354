"""External oracle: with the same weights copied in, our encoder, decoder and full model agree with
torch.nn.Transformer (ReLU, post-norm as in the paper; pre-norm too) to 1e-5 in float64."""
import pytest
import torch
from torch import nn

from tests.conftest import random_batch
from transformer import Transformer, TransformerConfig, decoder_mask, padding_mask

V = 40
# nn.Transformer warns that pre-norm layers cannot use its inference fast path; irrelevant here.
pytestmark = pytest.mark.filterwarnings("ignore:enable_nested_tensor is True")


def copy_attention(ours, ref):
    ref.in_proj_weight.copy_(ours.in_proj.weight)
    ref.in_proj_bias.copy_(ours.in_proj.bias)
    ref.out_proj.weight.copy_(ours.out_proj.weight)
    ref.out_proj.bias.copy_(ours.out_proj.bias)


def copy_linear(ours, ref):
    ref.weight.copy_(ours.weight)
    ref.bias.copy_(ours.bias)


def reference_for(model):
    """A torch.nn.Transformer holding `model`'s weights."""
    cfg = model.cfg
    ref = nn.Transformer(cfg.d_model, cfg.h, cfg.N, cfg.N, cfg.d_ff, dropout=0.0, activation="relu",
                         layer_norm_eps=cfg.layer_norm_eps, batch_first=True, norm_first=cfg.norm_first)
    ref = ref.double()
    with torch.no_grad():
        for ours, theirs in zip(model.encoder.layers, ref.encoder.layers):
            copy_attention(ours.self_attn, theirs.self_attn)
            copy_linear(ours.feed_forward.w_1, theirs.linear1)
            copy_linear(ours.feed_forward.w_2, theirs.linear2)
            for sub, norm in zip(ours.sublayers, (theirs.norm1, theirs.norm2)):
                norm.load_state_dict(sub.norm.state_dict())
        for ours, theirs in zip(model.decoder.layers, ref.decoder.layers):
            copy_attention(ours.self_attn, theirs.self_attn)
            copy_attention(ours.cross_attn, theirs.multihead_attn)
            copy_linear(ours.feed_forward.w_1, theirs.linear1)
            copy_linear(ours.feed_forward.w_2, theirs.linear2)
            for sub, norm in zip(ours.sublayers, (theirs.norm1, theirs.norm2, theirs.norm3)):
                norm.load_state_dict(sub.norm.state_dict())
        if cfg.norm_first:   # pre-norm stacks end with a LayerNorm, as nn.Transformer's do
            ref.encoder.norm.load_state_dict(model.encoder.norm.state_dict())
            ref.decoder.norm.load_state_dict(model.decoder.norm.state_dict())
        else:                # the paper's post-norm stacks have no extra final LayerNorm
            ref.encoder.norm = None
            ref.decoder.norm = None
    return ref


@pytest.fixture(params=[False, True], ids=["post-norm", "pre-norm"])
def pair(request):
    cfg = TransformerConfig(N=2, d_model=32, d_ff=64, h=4, P_drop=0.0, norm_first=request.param)
    model = Transformer(cfg, V, V).double()
    # make the LayerNorm gains and biases non-trivial so that copying them is tested too
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.LayerNorm):
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.5, 0.5)
    return model, reference_for(model)


def inputs():
    src, _ = random_batch(3, 9, V)
    tgt, _ = random_batch(3, 7, V)
    return src, tgt


def future_mask(length):
    """nn.Transformer's convention: True where a query may NOT look."""
    return torch.ones(length, length, dtype=torch.bool).triu(1)


def embedded(model, src, tgt):
    return model.src_pos(model.src_embed(src)), model.tgt_pos(model.tgt_embed(tgt))


def test_encoder_matches(pair):
    model, ref = pair
    src, tgt = inputs()
    x, _ = embedded(model, src, tgt)
    want = ref.encoder(x, src_key_padding_mask=src == 0)
    torch.testing.assert_close(model.encode(src), want, atol=1e-5, rtol=0)


def test_decoder_matches(pair):
    model, ref = pair
    src, tgt = inputs()
    _, y = embedded(model, src, tgt)
    memory = model.encode(src)
    causal = future_mask(tgt.size(1))
    want = ref.decoder(y, memory, tgt_mask=causal, tgt_key_padding_mask=tgt == 0,
                       memory_key_padding_mask=src == 0)
    got = model.decoder(y, memory, padding_mask(src, 0), decoder_mask(tgt, 0))
    torch.testing.assert_close(got, want, atol=1e-5, rtol=0)


def test_full_model_matches(pair):
    model, ref = pair
    src, tgt = inputs()
    x, y = embedded(model, src, tgt)
    causal = future_mask(tgt.size(1))
    hidden = ref(x, y, tgt_mask=causal, src_key_padding_mask=src == 0, tgt_key_padding_mask=tgt == 0,
                 memory_key_padding_mask=src == 0)
    want = hidden @ model.tgt_embed.lut.weight.T   # the output layer shares the embedding matrix
    real = tgt != 0      # outputs at target padding are left undefined (the decoder uses the causal kernel)
    torch.testing.assert_close(model(src, tgt)[real], want[real], atol=1e-5, rtol=0)
