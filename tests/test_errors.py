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


# ------------------------------------------------------------ the exact messages --

@pytest.mark.parametrize("fields, message", [
    (dict(N=0), r"^TransformerConfig\.N must be a positive integer, got 0$"),
    (dict(d_k=0), r"^TransformerConfig\.d_k must be a positive integer, got 0$"),
    (dict(d_model=7, h=1), r"^sinusoidal positions need an even d_model, got 7$"),
    (dict(pad_id=-1), r"^pad_id must be a token id \(>= 0\), got -1$"),
    (dict(pointer_id=0), r"^pointer_id must be None or a token id other than pad_id=0, got 0$"),
    (dict(pointer_id=-2), r"^pointer_id must be None or a token id other than pad_id=0, got -2$"),
    (dict(pointer_id="XX"), r"^pointer_id must be None or a token id other than pad_id=0, got 'XX'$"),
])
def test_config_messages(fields, message):
    with pytest.raises(ValueError, match=message):
        TransformerConfig(**fields)


def test_one_wide_heads_are_allowed():
    cfg = TransformerConfig(d_k=1, d_v=1)
    assert (cfg.d_k, cfg.d_v) == (1, 1)


def test_a_pointer_outside_the_target_vocabulary_is_refused():
    with pytest.raises(ValueError, match=r"^pointer_id=10 is outside the target vocabulary of 10$"):
        Transformer(TransformerConfig(N=1, d_model=16, d_ff=32, h=2, pointer_id=10), 12, 10)


def test_vocabulary_sizes_are_named_in_the_message():
    with pytest.raises(ValueError, match=r"^tgt_vocab must be an integer larger than pad_id=0, got 0$"):
        Transformer(TransformerConfig(N=1, d_model=16, d_ff=32, h=2), 10, 0)


@pytest.mark.parametrize("call, message", [
    (lambda m: m(torch.tensor([1, 2]), ok(1, 3)), r"^src must have shape \[batch, length\], got \(2,\)$"),
    (lambda m: m(ok(1, 3), torch.tensor([1, 2])), r"^tgt_in must have shape \[batch, length\], got \(2,\)$"),
    (lambda m: m.encode(torch.tensor([1, 2])), r"^src must have shape"),
    (lambda m: m.decoder_states(torch.tensor([1]), torch.zeros(1, 3, 16), ok(1, 3)), r"^tgt_in must have shape"),
    (lambda m: m.decoder_states(ok(1, 1), torch.zeros(1, 3, 16), torch.tensor([1, 2, 3])), r"^src must have shape"),
])
def test_shape_messages_name_the_argument(model, call, message):
    with pytest.raises(ValueError, match=message):
        call(model)


def test_a_bad_source_is_caught_at_the_first_cached_decoding_step(model):
    with pytest.raises(TypeError, match=r"^src must hold integer token ids"):
        model.decoder_states(ok(1, 1), torch.zeros(1, 3, 16), torch.ones(1, 3), cache={})


def test_embedding_checks_are_on_by_default_and_say_what_they_got():
    from transformer.embeddings import Embeddings, OutputProjection, check_ids, tie_weights
    with pytest.raises(ValueError, match=r"contains id 12, outside the vocabulary \[0, 10\)"):
        Embeddings(10, 4)(torch.tensor([[12]]))
    with pytest.raises(TypeError, match=r"^ids must be a torch\.Tensor of token ids, got list$"):
        check_ids([1, 2], 10)
    with pytest.raises(ValueError, match=r"^cannot tie weights of shapes \(10, 4\) and \(12, 4\): vocabularies differ$"):
        tie_weights(Embeddings(10, 4), OutputProjection(4, 12))


def test_positional_messages():
    from transformer.positional import sinusoidal_table
    with pytest.raises(ValueError, match=r"^sinusoidal positions need an even d_model, got 5$"):
        sinusoidal_table(4, 5)
