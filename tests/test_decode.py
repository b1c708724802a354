"""Greedy decoding and beam search: the key/value cache changes nothing but speed; search properties."""
import pytest
import torch

from transformer import Transformer, TransformerConfig
from transformer.decode import beam_search, greedy_decode, length_penalty, next_token_logits, sequence_logprob

BOS, EOS, V = 2, 3, 40


def make_model(**overrides):
    torch.manual_seed(0)
    cfg = TransformerConfig.preset("tiny", max_len=96, **overrides)
    return Transformer(cfg, V).eval()


def sources():
    g = torch.Generator().manual_seed(1)
    src = torch.randint(4, V, (5, 9), generator=g)
    src[1, 6:] = 0
    src[3, 2:] = 0
    return src


# the last: chapter 6.3's parser variant, whose decoder counts the words it wrote (token 7)
VARIANTS = [{}, {"norm_first": True}, {"positional": "learned"}, {"pointer_id": 7}]


@pytest.mark.parametrize("overrides", VARIANTS)
def test_incremental_logits_equal_full_recomputation(overrides):
    model, src = make_model(**overrides), sources()
    memory = model.encode(src)
    prefix = torch.cat([torch.full((5, 1), BOS), torch.randint(4, V, (5, 12))], dim=1)
    cache = {}
    for t in range(1, prefix.size(1) + 1):
        a = next_token_logits(model, prefix[:, :t], memory, src, cache)
        b = next_token_logits(model, prefix[:, :t], memory, src)
        assert torch.allclose(a, b, atol=1e-5), t


@pytest.mark.parametrize("overrides", VARIANTS)
def test_cache_gives_identical_outputs(overrides):
    model, src = make_model(**overrides), sources()
    assert torch.equal(greedy_decode(model, src, BOS, EOS), greedy_decode(model, src, BOS, EOS, use_cache=False))
    assert torch.equal(beam_search(model, src, BOS, EOS), beam_search(model, src, BOS, EOS, use_cache=False))


def test_beam_of_one_without_penalty_is_greedy():
    model, src = make_model(), sources()
    g, b = greedy_decode(model, src, BOS, EOS), beam_search(model, src, BOS, EOS, beam_size=1, alpha=0.0)
    n = max(g.size(1), b.size(1))
    pad = lambda x: torch.nn.functional.pad(x, (0, n - x.size(1)))
    assert torch.equal(pad(g), pad(b))


@pytest.mark.parametrize("decoder", ["greedy", "beam"])
def test_a_sentence_decodes_the_same_alone_or_in_a_padded_batch(decoder):
    model, src = make_model(), sources()
    run = (lambda s: greedy_decode(model, s, BOS, EOS)) if decoder == "greedy" else \
        (lambda s: beam_search(model, s, BOS, EOS, beam_size=3))
    batch = run(src)
    for i in range(src.size(0)):
        alone_src = src[i:i + 1, :int((src[i] != 0).sum())]
        alone = run(alone_src)[0]
        row = batch[i][:alone.size(0)]
        assert torch.equal(row, alone) and (batch[i][alone.size(0):] == 0).all()


def test_output_length_is_input_length_plus_50():
    model, src = make_model(), torch.randint(4, V, (3, 9))
    out = greedy_decode(model, src, BOS, -1)     # an end token the model can never choose: run to the limit
    assert out.shape == (3, 9 + 50) and (out[:, -1] == -1).all()   # forced end at the limit


def test_beam_output_never_exceeds_the_limit():
    model, src = make_model(), sources()
    out = beam_search(model, src, BOS, EOS, max_extra=2)
    lengths = (out != 0).sum(1)
    assert (lengths <= (src != 0).sum(1) + 2).all()
    assert (out[torch.arange(5), lengths - 1] == EOS).all()


def test_max_extra_and_positional_table_bound_the_output():
    model, src = make_model(), sources()
    src = src[:, :9].clone().fill_(5)
    assert greedy_decode(model, src, BOS, -1, max_extra=5).size(1) == 9 + 5
    assert greedy_decode(model, src, BOS, -1, max_extra=500).size(1) == model.cfg.max_len - 1
    padded = sources()
    lengths = (greedy_decode(model, padded, BOS, EOS, max_extra=3) != 0).sum(1)
    assert (lengths <= (padded != 0).sum(1) + 3).all()


def test_beam_finds_at_least_the_greedy_score_on_average():
    model, src = make_model(), sources()
    score = lambda out: (sequence_logprob(model, src, out, BOS, EOS)
                         / length_penalty((out != 0).sum(1).float(), 0.6))
    assert score(beam_search(model, src, BOS, EOS, beam_size=4)).mean() >= \
        score(greedy_decode(model, src, BOS, EOS)).mean() - 1e-5


def test_decoding_leaves_training_mode_alone():
    model = make_model().train()
    greedy_decode(model, sources(), BOS, EOS)
    beam_search(model, sources(), BOS, EOS)
    assert model.training


def test_over_long_source_is_an_error():
    model = make_model()
    with pytest.raises(ValueError, match="longer than the positional table"):
        greedy_decode(model, torch.randint(4, V, (1, 100)), BOS, EOS)


def test_several_new_positions_at_once_continue_a_cached_prefix():
    model, src = make_model(), sources()
    memory = model.encode(src)
    prefix = torch.cat([torch.full((5, 1), BOS), torch.randint(4, V, (5, 6))], dim=1)
    full = model.decode(prefix, memory, src)
    cache = {}
    first = model.decode(prefix[:, :2], memory, src, cache)       # two positions, then five more, cached
    rest = model.decode(prefix[:, 2:], memory, src, cache)
    assert cache["length"] == 7
    torch.testing.assert_close(torch.cat([first, rest], dim=1), full, atol=1e-5, rtol=1e-5)


def test_the_memory_keys_are_computed_once_while_decoding():
    model, src = make_model(), sources()
    memory = model.encode(src)
    prefix = torch.cat([torch.full((5, 1), BOS), torch.randint(4, V, (5, 2))], dim=1)
    cache = {}
    next_token_logits(model, prefix[:, :1], memory, src, cache)
    # from the second step on, encoder-decoder attention reads the cached keys: the memory passed is unused
    cached = next_token_logits(model, prefix[:, :2], torch.zeros_like(memory), src, cache)
    torch.testing.assert_close(cached, next_token_logits(model, prefix[:, :2], memory, src), atol=1e-5, rtol=1e-5)


# ------------------------------------------- the fast decoders against the readable ones --

def mixed_sources(n=12, longest=16, seed=2):
    """Sentences of 1 to `longest` tokens, so that they reach their limits at different steps."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, longest + 1, (n,), generator=g)
    src = torch.randint(4, V, (n, longest), generator=g)
    src[torch.arange(longest)[None, :] >= lengths[:, None]] = 0
    return src


@pytest.mark.parametrize("overrides", VARIANTS)
@pytest.mark.parametrize("use_cache", [True, False])
def test_fast_greedy_equals_the_readable_version(overrides, use_cache):
    from transformer.decode import simple_greedy_decode
    model = make_model(**overrides)
    for eos, extra in ((EOS, 20), (EOS, 2), (7, 10)):
        src = mixed_sources()
        fast = greedy_decode(model, src, BOS, eos, max_extra=extra, use_cache=use_cache)
        assert torch.equal(fast, simple_greedy_decode(model, src, BOS, eos, max_extra=extra)), (eos, extra)


@pytest.mark.parametrize("overrides", VARIANTS)
@pytest.mark.parametrize("use_cache", [True, False])
def test_fast_beam_search_equals_the_readable_version(overrides, use_cache):
    from transformer.decode import simple_beam_search
    model = make_model(**overrides)
    for k, alpha, extra in ((4, 0.6, 20), (2, 0.0, 3), (3, 1.5, 10), (1, 0.6, 8), (6, 0.6, 5)):
        src = mixed_sources()
        fast = beam_search(model, src, BOS, EOS, k, alpha, max_extra=extra, use_cache=use_cache)
        assert torch.equal(fast, simple_beam_search(model, src, BOS, EOS, k, alpha, max_extra=extra)), (k, alpha)


def test_fast_beam_search_keeps_the_first_of_equal_hypotheses():
    """Two finished hypotheses with the same normalised score: the one found first wins, as max() did."""
    from transformer.decode import simple_beam_search
    torch.manual_seed(0)
    model = make_model()
    with torch.no_grad():                       # every token equally likely: all scores tie
        model.generator.proj.weight.zero_()
    src = mixed_sources(n=6)
    assert torch.equal(beam_search(model, src, BOS, EOS, 4, 0.6, max_extra=4),
                       simple_beam_search(model, src, BOS, EOS, 4, 0.6, max_extra=4))


def decoder_rows_and_syncs(model, decode):
    """Rows the decoder stack saw at each step, and the operators that made the host wait (the
    trainer's counter: one definition of a sync for the book, the benchmarks and the tests)."""
    from transformer.syncs import HostSyncCounter
    rows = []
    hook = model.decoder.register_forward_pre_hook(lambda module, args: rows.append(args[0].size(0)))
    try:
        with HostSyncCounter() as counter:
            decode()
    finally:
        hook.remove()
    return rows, len(counter.syncs)


@pytest.mark.parametrize("search", ["greedy", "beam"])
def test_finished_sentences_leave_the_batch_and_the_host_waits_once_a_step(search):
    from transformer.decode import simple_beam_search, simple_greedy_decode
    model, src = make_model(), mixed_sources()
    model.validate_ids = False      # the id range check is a host sync of its own, at the first step
    fast, simple = (greedy_decode, simple_greedy_decode) if search == "greedy" else (beam_search, simple_beam_search)
    rows, syncs = decoder_rows_and_syncs(model, lambda: fast(model, src, BOS, EOS, max_extra=10))
    rows_simple, syncs_simple = decoder_rows_and_syncs(model, lambda: simple(model, src, BOS, EOS, max_extra=10))
    k = 1 if search == "greedy" else 4
    assert rows[0] == rows_simple[0] == 12 * k and len(rows) == len(rows_simple)
    assert rows == sorted(rows, reverse=True) and rows[-1] < rows[0] and sum(rows) < 0.8 * sum(rows_simple)
    assert all(r % k == 0 for r in rows)                # whole sentences leave, all k rows at once
    # int(limit.max()) before the loop, one nonzero() per step, and beam search's output width at the end
    assert syncs <= 1 + len(rows) + (search == "beam"), (syncs, len(rows))
    assert syncs <= syncs_simple


def test_the_cache_grows_in_place_and_matches_concatenation():
    from transformer.attention import append_to_cache
    cache, keys = {}, []
    buffers = set()
    for step in range(40):
        k = torch.randn(2, 3, 1, 4)
        keys.append(k)
        got_k, got_v = append_to_cache(cache, k, -k)
        assert torch.equal(got_k, torch.cat(keys, dim=2)) and torch.equal(got_v, -torch.cat(keys, dim=2))
        assert got_k.data_ptr() == cache["k"].data_ptr()          # a view of the buffer, not a copy
        buffers.add(cache["k"].data_ptr())
    assert cache["n"] == 40 and cache["k"].size(2) >= 40
    assert len(buffers) == 3          # room for 16, then 34, then 70: three buffers for 40 steps
    got_k, _ = append_to_cache(cache, torch.randn(2, 3, 5, 4), torch.randn(2, 3, 5, 4))   # several at once
    assert got_k.size(2) == 45


def test_scoring_a_sequence_leaves_the_model_in_its_mode():
    model, src = make_model(), sources()
    out = greedy_decode(model, src, BOS, EOS, max_extra=5)
    model.train()
    scores = sequence_logprob(model, src, out, BOS, EOS)
    assert model.training and all(m.training for m in model.modules())
    model.eval()
    assert torch.equal(scores, sequence_logprob(model, src, out, BOS, EOS)) and not model.training


@pytest.mark.parametrize("search", ["simple_greedy_decode", "greedy_decode", "simple_beam_search", "beam_search"])
def test_no_search_ends_a_sentence_before_its_first_token(search):
    """A model that would rather end at once (</s> far ahead at every step) still writes one token first,
    in every search and at alpha 0, where nothing else weighs length: an empty output is never finished,
    and never among the n best."""
    from transformer import decode
    model, src = make_model(), sources()
    ahead = torch.zeros(V)
    ahead[EOS] = 50.0
    model.generator.register_forward_hook(lambda module, inputs, logits: logits + ahead)
    kwargs = {"alpha": 0.0} if "beam" in search else {}
    out = getattr(decode, search)(model, src, BOS, EOS, **kwargs)
    assert (out[:, 0] != EOS).all() and (out[:, 1] == EOS).all()
    n_best = decode.simple_beam_search(model, src, BOS, EOS, alpha=0.0, nbest=4)
    assert all(len(ids) > 0 for sentence in n_best for _, ids in sentence)
