"""Absolute checks: each expected value is worked out here, from the paper's formulas or by hand, never by
calling the code under test a second time. (Comparing two runs of the same code lets a shared mistake
cancel out; these tests are what `make mutation` leans on.)"""
import contextlib
import math
from dataclasses import asdict

import pytest
import sacrebleu
import torch

from transformer import Transformer, TransformerConfig
from transformer.data import accumulation_steps, train_vocab
from transformer.decode import beam_search, greedy_decode, length_penalty, translate
from transformer.distributed import Runtime
from transformer.embeddings import Embeddings
from transformer.evaluate import sacre_bleu, split_compounds, tokenized_bleu
from transformer.positional import LearnedPositionalEmbedding, SinusoidalPositionalEncoding, sinusoidal_table
from transformer.run import load_model, save_checkpoint
from transformer.step import train_step


# --------------------------------------------------------- one training step --

def smoothed_loss_by_hand(logits, target, eps, pad):
    """Sum over non-padding positions of -sum_v q(v) log p(v), q = (1 - eps) one_hot + eps / V,
    written position by position with an explicit log-sum-exp."""
    V = logits.size(-1)
    total, nll, n = 0.0, 0.0, 0
    for row, tgt_row in zip(logits, target):
        for z, y in zip(row, tgt_row.tolist()):
            if y == pad:
                continue
            log_p = z - (z - z.max()).exp().sum().log() - z.max()
            total = total - (1 - eps) * log_p[y] - eps / V * log_p.sum()
            nll = nll - log_p[y]
            n += 1
    return total, nll, n


def micro_batches():
    """Two micro-batches of different sizes, with padding (id 0) inside the targets."""
    b1 = (torch.tensor([[5, 6, 7, 3], [8, 9, 3, 0]]),
          torch.tensor([[2, 10, 11, 12], [2, 13, 0, 0]]),
          torch.tensor([[10, 11, 12, 3], [13, 3, 0, 0]]))
    b2 = (torch.tensor([[4, 5, 3]]), torch.tensor([[2, 14, 15, 16, 17]]), torch.tensor([[14, 15, 16, 17, 3]]))
    return [b1, b2]


@pytest.mark.parametrize("eps", [0.0, 0.1])
def test_a_training_step_applies_the_hand_computed_gradient(eps):
    """With plain SGD at rate 1 the step must move every weight by exactly minus the gradient of
    (sum of smoothed losses over the step's target tokens) / (number of those tokens)."""
    torch.manual_seed(0)
    cfg = TransformerConfig(N=1, d_model=16, d_ff=32, h=2, P_drop=0.0, max_len=16)
    model = Transformer(cfg, 20).double()
    model.validate_ids = False
    before = {k: v.clone() for k, v in model.state_dict().items()}
    batches = micro_batches()
    n_tgt = sum(int((b[2] != 0).sum()) for b in batches)
    assert n_tgt == 6 + 5

    # by hand, on a copy of the model: loss summed over the step, divided once by the step's tokens
    twin = Transformer(cfg, 20).double()
    twin.load_state_dict(before)
    parts = [smoothed_loss_by_hand(twin(s, ti), to, eps, pad=0) for s, ti, to in batches]
    loss_sum, nll_sum = sum(p[0] for p in parts), sum(p[1] for p in parts)
    assert sum(p[2] for p in parts) == n_tgt
    (loss_sum / n_tgt).backward()
    expected = {name: before[name] - p.grad for name, p in twin.named_parameters()}

    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda done: 1.0)
    sums = train_step(model, optimizer, scheduler, batches, n_tgt, eps, 0, Runtime(), amp=False)

    torch.testing.assert_close(sums, torch.stack([loss_sum, nll_sum]).detach().to(sums.dtype), rtol=1e-6, atol=1e-6)
    after = dict(model.named_parameters())
    for name, value in expected.items():
        # the loss is taken in float32 (chapter 5.4), hence float32 tolerances on a float64 model
        torch.testing.assert_close(after[name].detach(), value, rtol=1e-5, atol=1e-7, msg=name)
    assert scheduler.last_epoch == 1, "the scheduler advances once per step"
    assert all(p.grad is None for p in model.parameters()), "gradients are cleared for the next step"


def test_accumulation_rounds_up_to_reach_the_step_size():
    assert accumulation_steps(25_000, 4096) == 7          # 6 micro-batches hold only 24,576 tokens
    assert accumulation_steps(25_000, 4096, world_size=8) == 1
    assert accumulation_steps(10, 4, world_size=2) == 2
    assert accumulation_steps(8, 4, world_size=2) == 1
    assert accumulation_steps(1, 4096) == 1


# ------------------------------------------------------- embeddings, positions --

def test_embeddings_are_the_table_rows_times_sqrt_d_model():
    emb = Embeddings(11, 16)
    ids = torch.tensor([[3, 0, 10]])
    table = emb.lut.weight.detach()
    expected = torch.stack([table[3], table[0], table[10]])[None] * 4.0     # sqrt(16) = 4
    torch.testing.assert_close(emb(ids), expected, rtol=0, atol=0)


def test_sinusoid_table_is_the_paper_s_formula():
    d = 8
    table = sinusoidal_table(120, d)
    for pos in (0, 1, 7, 50, 119):
        for i in range(d // 2):
            angle = pos / 10000 ** (2 * i / d)
            assert table[pos, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-6), (pos, i)
            assert table[pos, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-6), (pos, i)
    assert table[1, 2].item() == pytest.approx(math.sin(0.1), abs=1e-7)       # 1 / 10000^(2/8) = 0.1
    pe = SinusoidalPositionalEncoding(d, max_len=120)
    x = torch.zeros(1, 3, d)
    torch.testing.assert_close(pe(x, start=5)[0], table[5:8])


def test_learned_positions_add_their_own_rows():
    pe = LearnedPositionalEmbedding(4, max_len=10)
    x = torch.ones(2, 3, 4)
    torch.testing.assert_close(pe(x, start=2), 1 + pe.table.weight.detach()[2:5].expand(2, 3, 4))


def stack_inputs(model, src, tgt_in):
    """What the encoder and decoder stacks receive, caught with forward pre-hooks."""
    seen = {}

    def catch(name):
        def hook(module, args):
            seen[name] = args[0].detach()
        return hook
    hooks = [model.encoder.register_forward_pre_hook(catch("enc")),
             model.decoder.register_forward_pre_hook(catch("dec"))]
    model(src, tgt_in)
    for h in hooks:
        h.remove()
    return seen["enc"], seen["dec"]


def test_the_stacks_receive_scaled_embeddings_plus_sinusoids_with_dropout():
    torch.manual_seed(0)
    d, P = 32, 0.5
    model = Transformer(TransformerConfig(N=1, d_model=d, d_ff=64, h=4, P_drop=P, max_len=64), 25)
    src, tgt = torch.randint(4, 25, (4, 30)), torch.randint(4, 25, (4, 20))
    W = model.src_embed.lut.weight.detach()
    pe = torch.tensor([[math.sin(p / 10000 ** (2 * (j // 2) / d)) if j % 2 == 0 else
                        math.cos(p / 10000 ** (2 * (j // 2) / d)) for j in range(d)] for p in range(30)])
    expected = (W[src] * math.sqrt(d) + pe[None], W[tgt] * math.sqrt(d) + pe[None, :20])
    for got, want in zip(stack_inputs(model.eval(), src, tgt), expected):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    # training: each entry is dropped (0) or kept and scaled by 1 / (1 - P)
    for got, want in zip(stack_inputs(model.train(), src, tgt), expected):
        dropped = got == 0
        assert 0.4 < dropped.float().mean().item() < 0.6
        torch.testing.assert_close(got[~dropped], want[~dropped] / (1 - P), rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- beam search --

BOS, EOS, A, B, C, D = 2, 3, 4, 5, 6, 7
TOY_V = 8


class HandSetModel(torch.nn.Module):
    """A stand-in for a trained Transformer whose next-token probabilities are written out by hand
    as a table keyed by the tokens produced so far. While decoding with a cache, it keeps its own prefix
    there, and reorders it when the beam moves (reorder_cache), as the real model does its keys."""

    def __init__(self, table):
        super().__init__()
        self.table, self.cfg = table, TransformerConfig(max_len=64)

    def encode(self, src):
        return torch.zeros(src.size(0), src.size(1), 1)

    def decoder_states(self, tgt_in, memory, src, cache=None):
        if cache is not None:
            entry = cache.setdefault(0, {"self": {}})["self"]
            if "k" in entry:
                tgt_in = torch.cat([entry["k"], tgt_in], dim=1)
            entry["k"] = entry["v"] = tgt_in
        rows = []
        for prefix in tgt_in.tolist():
            probs = torch.full((TOY_V,), 1e-9, dtype=torch.float64)
            for token, p in self.table.get(tuple(prefix[1:]), {EOS: 1.0}).items():
                probs[token] = p
            rows.append(probs.log())
        return torch.stack(rows)[:, None, :].float()       # [B, 1, V]: only the last position is read

    def generator(self, states):
        return states

    def reorder_cache(self, cache, rows, memory_rows=None):
        entry = cache.get(0, {}).get("self", {})
        if "k" in entry:
            entry["k"] = entry["v"] = entry["k"].index_select(0, rows)


SOURCE = torch.tensor([[9, 9, 9]])

# greedy takes A (0.6) and must then end with probability 0.4: 0.24 in all;
# B (0.4) followed by EOS (0.9) is the more likely sentence: 0.36
GREEDY_TRAP = {(): {A: 0.6, B: 0.4}, (A,): {EOS: 0.4, C: 0.3, D: 0.3}, (B,): {EOS: 0.9, C: 0.1}}


@pytest.mark.parametrize("use_cache", [True, False])
def test_beam_search_finds_the_sentence_greedy_decoding_misses(use_cache):
    model = HandSetModel(GREEDY_TRAP)
    assert greedy_decode(model, SOURCE, BOS, EOS, use_cache=use_cache).tolist() == [[A, EOS]]
    assert beam_search(model, SOURCE, BOS, EOS, beam_size=2, alpha=0.0, use_cache=use_cache).tolist() == [[B, EOS]]
    assert beam_search(model, SOURCE, BOS, EOS, beam_size=1, alpha=0.0, use_cache=use_cache).tolist() == [[A, EOS]]


# B EOS has probability 0.52 * 0.95 = 0.494, A C EOS 0.48 * 0.99 * 0.99 = 0.470: without a length penalty
# the short sentence wins; with alpha = 1, log 0.494 / (7/6) = -0.604 < log 0.470 / (8/6) = -0.566
LONGER_IS_BETTER_PER_TOKEN = {(): {A: 0.48, B: 0.52}, (B,): {EOS: 0.95, D: 0.05},
                              (A,): {C: 0.99, D: 0.01}, (A, C): {EOS: 0.99, D: 0.01}}


def test_the_length_penalty_changes_the_winner_by_the_hand_computed_amount():
    assert length_penalty(2, 1.0) == pytest.approx(7 / 6)
    assert length_penalty(3, 1.0) == pytest.approx(8 / 6)
    assert length_penalty(3, 0.6) == pytest.approx((8 / 6) ** 0.6)
    assert length_penalty(10, 0.0) == 1.0
    short, long = math.log(0.52 * 0.95), math.log(0.48 * 0.99 * 0.99)
    assert short > long and short / (7 / 6) < long / (8 / 6)
    model = HandSetModel(LONGER_IS_BETTER_PER_TOKEN)
    assert beam_search(model, SOURCE, BOS, EOS, beam_size=2, alpha=0.0).tolist() == [[B, EOS]]
    assert beam_search(model, SOURCE, BOS, EOS, beam_size=2, alpha=1.0).tolist() == [[A, C, EOS]]


def test_beam_search_stops_at_the_output_limit():
    model = HandSetModel({(): {A: 1.0}, (A,): {A: 1.0}, (A, A): {A: 1.0}, (A, A, A): {A: 0.5, EOS: 0.5}})
    # input length 3 + max_extra 1: at most 4 tokens, the last of them the forced end (which keeps the
    # model's own end probability, 0.5 here, in the hypothesis' score)
    assert beam_search(model, SOURCE, BOS, EOS, beam_size=2, max_extra=1).tolist() == [[A, A, A, EOS]]
    assert greedy_decode(model, SOURCE, BOS, EOS, max_extra=1).tolist() == [[A, A, A, EOS]]


# ------------------------------------------------------- checkpoint averaging --

@pytest.fixture(scope="module")
def tiny_vocab():
    text = [("a dog runs in the park .", "ein Hund rennt im Park ."),
            ("two men play football .", "zwei Männer spielen Fußball ."),
            ("the E-Mail arrived today .", "die E-Mail kam heute an .")] * 30
    return train_vocab(text, vocab_size=400)


def test_load_model_averages_exactly_the_last_k_checkpoints(tmp_path, tiny_vocab):
    cfg = TransformerConfig(N=1, d_model=8, d_ff=16, h=2, max_len=16)
    model = Transformer(cfg, len(tiny_vocab))
    for step in (1, 2, 3, 4, 5):     # every weight of checkpoint `step` equals `step`
        state = {k: torch.full_like(v, float(step)) for k, v in model.state_dict().items()}
        save_checkpoint(tmp_path, step, {"model": state, "model_config": asdict(cfg), "vocab": tiny_vocab.proto},
                        keep=10)
    for k, mean in ((1, 5.0), (2, 4.5), (3, 4.0), (5, 3.0)):
        averaged, _, used = load_model(tmp_path, average_last=k)
        assert used == [f"step_{s:07d}.pt" for s in range(6 - k, 6)]
        for name, value in averaged.state_dict().items():
            assert torch.all(value == mean), (k, name)
    moved, _, _ = load_model(tmp_path, device="meta")
    assert all(p.device.type == "meta" for p in moved.parameters())
    single = tmp_path / "single"
    save_checkpoint(single, 7, {"model": model.state_dict(), "model_config": asdict(cfg), "vocab": tiny_vocab.proto},
                    keep=1)
    assert load_model(single)[2] == ["step_0000007.pt"]
    model, _, used = load_model(tmp_path)                 # by default: the newest checkpoint alone
    assert used == ["step_0000005.pt"] and all(torch.all(v == 5.0) for v in model.state_dict().values())
    with pytest.raises(ValueError, match=r"has 5 checkpoints, cannot average the last 6$"):
        load_model(tmp_path, average_last=6)


# ------------------------------------------------------------------------ BLEU --

def test_translations_reach_bleu_as_detokenised_text(tiny_vocab, monkeypatch):
    """A decoder that copies its input makes `translate` an identity on text: any BPE piece or
    special token left in the output would show, and BLEU against the input would drop below 100."""
    def copy_decoder(model, src, bos, eos, *args, **kwargs):
        return src
    monkeypatch.setattr("transformer.decode.beam_search", copy_decoder)
    monkeypatch.setattr("transformer.decode.greedy_decode", copy_decoder)
    sentences = ["two men play football .", "a dog runs in the park today .", "the E-Mail arrived ."]
    model = Transformer(TransformerConfig(N=1, d_model=8, d_ff=16, h=2, max_len=32), len(tiny_vocab))
    for beam in (1, 4):
        out = translate(model, tiny_vocab, sentences, beam_size=beam, progress=False)
        assert out == sentences
    pieces = [" ".join(tiny_vocab.pieces(s)) for s in sentences]
    assert any("▁" in p for p in pieces)
    assert sacre_bleu(out, sentences)[0] == pytest.approx(100.0) and sacre_bleu(pieces, sentences)[0] < 60


# One word changed in a sentence whose compound 'Test-Fall' becomes three tokens when split:
# unsplit, 6 tokens with 5/6, 4/5, 3/4, 2/3 matching n-grams: BLEU = (2/6)^(1/4);
# split, 8 tokens with 7/8, 6/7, 5/6, 4/5: BLEU = (4/8)^(1/4). Equal lengths: no brevity penalty.
HYP, REF = "Sie lasen die Test-Fall Akte gestern", "Sie lasen die Test-Fall Akte heute"


def test_tokenised_bleu_splits_compounds_on_a_known_pair():
    assert split_compounds(HYP) == "Sie lasen die Test ##AT##-##AT## Fall Akte gestern"
    assert tokenized_bleu([HYP], [REF])[0] == pytest.approx(100 * (4 / 8) ** 0.25, abs=1e-9)
    assert sacre_bleu([HYP], [REF])[0] == pytest.approx(100 * (2 / 6) ** 0.25, abs=1e-9)


def test_bleu_pairs_each_hypothesis_with_its_own_reference():
    hyps = ["ein Hund rennt im Park", "zwei Männer spielen Fußball"]
    assert sacre_bleu(hyps, hyps)[0] == pytest.approx(100.0)
    assert sacre_bleu(hyps, hyps[::-1])[0] == pytest.approx(sacrebleu.corpus_bleu(hyps, [hyps[::-1]]).score)
    assert sacre_bleu(hyps, hyps[::-1])[0] < 10


def test_positions_far_down_the_table_and_at_its_end():
    d = 16
    table = sinusoidal_table(1024, d)
    for pos in (1000, 1023):
        for i in range(d // 2):
            angle = pos / 10000 ** (2 * i / d)
            assert table[pos, 2 * i].item() == pytest.approx(math.sin(angle), abs=2e-7), (pos, i)
            assert table[pos, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=2e-7), (pos, i)
    for module in (SinusoidalPositionalEncoding(d), LearnedPositionalEmbedding(d)):
        assert module(torch.zeros(1, 1024, d)).shape == (1, 1024, d)     # the default table: 1024 positions
        with pytest.raises(ValueError, match="longer than the positional table"):
            module(torch.zeros(1, 1025, d))
        x = torch.randn(1, 3, d).bfloat16()
        assert module(x).dtype == torch.bfloat16
    learned = LearnedPositionalEmbedding(4, max_len=8)
    torch.testing.assert_close(learned(torch.zeros(1, 3, 4)), learned.table.weight.detach()[None, :3])
    assert "pe" not in SinusoidalPositionalEncoding(d).state_dict()    # a fixed table: not in checkpoints


class NoSyncRecorder(torch.nn.Module):
    """A stand-in for DistributedDataParallel: records for which micro-batches gradients were held back."""

    def __init__(self, model):
        super().__init__()
        self.model, self.held, self.calls = model, [], 0

    def forward(self, *args):
        self.calls += 1
        return self.model(*args)

    def no_sync(self):
        self.held.append(self.calls)        # the index of the micro-batch about to run
        return contextlib.nullcontext()


def test_gradients_are_exchanged_after_the_last_micro_batch_only(monkeypatch):
    torch.manual_seed(0)
    model = Transformer(TransformerConfig(N=1, d_model=16, d_ff=32, h=2, P_drop=0.0, max_len=16), 20)
    model.validate_ids = False
    net = NoSyncRecorder(model)
    batches = micro_batches() + micro_batches()[:1]
    seen = []
    monkeypatch.setattr("transformer.step.autocast", lambda device, amp: seen.append((device, amp)) or
                        contextlib.nullcontext())
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda done: 1.0)
    rt = Runtime(world=2)
    train_step(net, optimizer, scheduler, batches, 20, 0.1, 0, rt)
    assert net.held == [0, 1]                              # micro-batches 0 and 1 held back, 2 exchanged
    assert seen == [(rt.device, True)] * 3                 # autocast asked for on the step's device, by default


def test_dropout_masks_follow_the_micro_batch_seeds():
    batches = micro_batches()
    results = []
    for noise in (1, 2):
        torch.manual_seed(0)
        model = Transformer(TransformerConfig(N=1, d_model=16, d_ff=32, h=2, P_drop=0.5, max_len=16), 20)
        model.validate_ids = False
        torch.manual_seed(noise)              # a different random state before the step
        optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda done: 1.0)
        results.append(train_step(model, optimizer, scheduler, batches, 11, 0.1, 0, Runtime(), seeds=[7, 8]))
    torch.testing.assert_close(results[0], results[1])


def test_a_step_and_its_positions_stay_on_the_model_s_device():
    """The 'meta' device stands in for a GPU: tensors made without naming the device would land on the CPU."""
    learned = LearnedPositionalEmbedding(4).to("meta")
    assert learned(torch.zeros(1, 3, 4, device="meta")).device.type == "meta"
    model = Transformer(TransformerConfig(N=1, d_model=16, d_ff=32, h=2, P_drop=0.0, max_len=16), 20).to("meta")
    model.validate_ids = False
    ids = torch.ones(2, 4, dtype=torch.long, device="meta")
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda done: 1.0)
    sums = train_step(model, optimizer, scheduler, [(ids, ids, ids)], 8, 0.1, 0, Runtime(device=torch.device("meta")),
                      amp=False)
    assert sums.device.type == "meta"
