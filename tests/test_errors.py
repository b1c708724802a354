"""Bad input gets a clear error that names the problem."""
import pytest
import torch

from transformer import MultiHeadAttention, Transformer, TransformerConfig

V = 20


@pytest.fixture(scope="module")
def model():
    return Transformer(TransformerConfig(N=1, d_model=16, d_ff=32, h=2, max_len=12), V, V).eval()


def ok(*shape):
    return torch.randint(1, V, shape)


@pytest.mark.parametrize("bad_id", [V, V + 100, -1])
@pytest.mark.parametrize("side", ["src", "tgt"])
def test_ids_outside_the_vocabulary(model, bad_id, side):
    src, tgt = ok(2, 5), ok(2, 4)
    (src if side == "src" else tgt)[1, 2] = bad_id
    with pytest.raises(ValueError, match=rf"id {bad_id}, outside the vocabulary \[0, {V}\)"):
        model(src, tgt)


@pytest.mark.parametrize("side", ["src", "tgt"])
def test_sequences_longer_than_the_positional_table(model, side):
    src, tgt = (ok(1, 13), ok(1, 4)) if side == "src" else (ok(1, 4), ok(1, 13))
    with pytest.raises(ValueError, match=r"length 13 is longer than the positional table \(max_len=12\)"):
        model(src, tgt)


def test_mismatched_batch_sizes(model):
    with pytest.raises(ValueError, match="same batch size, got 2 and 3"):
        model(ok(2, 5), ok(3, 4))
    with pytest.raises(ValueError, match="batch mismatch"):
        model.decode(ok(3, 4), model.encode(ok(2, 5)), ok(2, 5))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bool])
def test_float_tensors_where_ids_belong(model, dtype):
    with pytest.raises(TypeError, match=r"src must hold integer token ids .* got dtype"):
        model(ok(2, 5).to(dtype), ok(2, 4))


def test_not_a_tensor_or_wrong_rank(model):
    with pytest.raises(TypeError, match="must be a torch.Tensor"):
        model([[1, 2, 3]], ok(1, 4))
    with pytest.raises(ValueError, match=r"shape \[batch, length\], got \(5,\)"):
        model(ok(5), ok(1, 4))


def test_d_model_not_divisible_by_h():
    with pytest.raises(ValueError, match="d_model=100 is not divisible by the number of heads h=8"):
        TransformerConfig(d_model=100, h=8)
    with pytest.raises(ValueError, match="not divisible"):
        MultiHeadAttention(100, 8)


@pytest.mark.parametrize("bad", [dict(N=0), dict(P_drop=1.0), dict(eps_ls=-0.1), dict(positional="rope"),
                                 dict(d_k=0), dict(d_model=7, h=7)])
def test_bad_configs(bad):
    with pytest.raises(ValueError):
        TransformerConfig(**bad)


def test_unknown_preset_lists_the_choices():
    with pytest.raises(ValueError, match="unknown preset 'huge'; choose one of base, A1"):
        TransformerConfig.preset("huge")


def test_vocab_must_hold_the_padding_id():
    with pytest.raises(ValueError, match="src_vocab must be an integer larger than pad_id=0"):
        Transformer(TransformerConfig.preset("tiny"), 0, 10)
