"""The GPU's failure modes, checked on the CPU: host syncs, compilation, causal kernels, safe checkpoints,
device names, the command line's --set, the loss, and the batches fed to a step."""
import fractions
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from transformer import Transformer, TransformerConfig
from transformer.attention import CAUSAL, MultiHeadAttention, decoder_mask, padding_mask
from transformer.checkpoint import CheckpointError, capture_rng, load_checkpoint, restore_rng
from transformer.data import (PAD, BatchStream, ParallelData, TokenArray, batch_shape, collate, split_batch,
                              token_batches)
from transformer.distributed import Runtime
from transformer.loss import label_smoothed_nll
from transformer.machine import resolve_device
from transformer.optim import build_optimizer
from transformer.profiles import PROFILES, get_profile, parse_overrides, steps_per_interval
from transformer.run import load_latest_checkpoint, save_checkpoint
from transformer.step import StepFeeder, train_step, training_stream
from transformer.syncs import HostSyncCounter

V = 60


def toy_data(n=200, seed=0):
    rng = np.random.default_rng(seed)
    src = [rng.integers(4, V, rng.integers(1, 20)).tolist() for _ in range(n)]
    tgt = [rng.integers(4, V, rng.integers(1, 20)).tolist() for _ in range(n)]
    return ParallelData(TokenArray.from_lists(src), TokenArray.from_lists(tgt))


def tiny_model(**overrides):
    model = Transformer(TransformerConfig.preset("tiny", max_len=64, **overrides), V)
    model.validate_ids = False
    return model


# ---------------------------------------------------------------- host syncs --

def test_a_training_micro_batch_makes_no_host_sync():
    data = toy_data()
    src, tgt_in, tgt_out = collate(data, np.arange(8), vocab_size=V)
    model = tiny_model()
    with HostSyncCounter() as counter:
        loss, nll, _ = label_smoothed_nll(model(src, tgt_in), tgt_out, 0.1, PAD)
        loss.backward()
    assert counter.syncs == []


def test_the_counter_sees_the_syncs_it_is_meant_to_catch():
    data = toy_data()
    src, tgt_in, tgt_out = collate(data, np.arange(8))
    model = tiny_model()
    model.validate_ids = True          # the public API's id check: one sync per embedding call
    logits = torch.randn(2, 3, 5)
    with HostSyncCounter() as counter:
        model(src, tgt_in)
        logits[logits > 0].sum()       # boolean-mask indexing
        logits.sum().item()
    assert counter.syncs.count("aten._local_scalar_dense.default") >= 3 and "aten.index.Tensor" in counter.syncs


def test_bad_ids_still_get_a_clear_error_from_the_host_check_and_the_model():
    data = ParallelData(TokenArray.from_lists([[5, 6, V + 3]]), TokenArray.from_lists([[7]]))
    with pytest.raises(ValueError, match=rf"source sentence 0 contains id {V + 3}, outside the vocabulary \[0, {V}\)"):
        collate(data, [0], vocab_size=V)
    model = Transformer(TransformerConfig.preset("tiny"), V)
    with pytest.raises(ValueError, match=rf"contains id {V + 3}, outside the vocabulary \[0, {V}\)"):
        model(torch.tensor([[5, V + 3]]), torch.tensor([[2, 5]]))


# ------------------------------------------------------------------ compile --

@pytest.mark.slow
def test_model_and_loss_compile_as_one_graph_without_a_recompile_per_shape():
    torch._dynamo.reset()
    compiled_graphs = []

    def counting_backend(gm, example_inputs):
        compiled_graphs.append(gm)
        return gm.forward

    model = tiny_model()
    step = torch.compile(lambda s, ti, to: label_smoothed_nll(model(s, ti), to, 0.1, PAD)[0],
                         backend=counting_backend, fullgraph=True)
    data = toy_data(400)
    stream = BatchStream(data, max_tokens=300, seed=0)
    batches = stream.batches(0)
    shapes = set()
    for idx in batches:
        src, tgt_in, tgt_out = collate(data, idx)
        if (src.shape, tgt_in.shape) in shapes:
            continue
        shapes.add((src.shape, tgt_in.shape))
        step(src, tgt_in, tgt_out).backward()
        if len(shapes) == 6:
            break
    assert len(shapes) >= 4
    assert len(compiled_graphs) <= 2, f"{len(compiled_graphs)} compilations for {len(shapes)} shapes"
    torch._dynamo.reset()


# ------------------------------------------------------------------- causal --

def test_the_causal_kernel_gives_the_masked_outputs_at_every_real_position():
    torch.manual_seed(0)
    mha = MultiHeadAttention(32, 4).double()
    tgt = torch.tensor([[5, 7, 9, 4, 8, 3], [6, 2, 8, 3, 0, 0], [4, 0, 0, 0, 0, 0]])
    y = torch.randn(3, 6, 32, dtype=torch.float64)
    real = tgt != 0
    torch.testing.assert_close(mha(y, y, CAUSAL)[real], mha(y, y, decoder_mask(tgt, 0))[real], atol=1e-12, rtol=0)

    model = tiny_model(P_drop=0.0).double().eval()
    src = torch.tensor([[5, 6, 7, 3, 0], [8, 9, 3, 0, 0], [10, 11, 12, 13, 3]])
    memory = model.encode(src)
    y = model.dropout(model.tgt_pos(model.tgt_embed(tgt, False)))
    explicit = model.decoder(y, memory, padding_mask(src, 0), decoder_mask(tgt, 0))
    torch.testing.assert_close(model.decoder_states(tgt, memory, src)[real], explicit[real], atol=1e-10, rtol=0)


# -------------------------------------------------------------------- loss --

def reference_loss(logits, target, eps, pad):
    """The loss as chapter 5.4 first wrote it: float copy, boolean selection of non-padding tokens."""
    logp = logits.float().log_softmax(-1)
    keep = target != pad
    nll = -logp.gather(-1, target.unsqueeze(-1)).squeeze(-1)
    loss = (1 - eps) * nll + eps * -logp.mean(-1)
    return loss[keep].sum(), nll[keep].sum(), keep.sum()


@pytest.mark.parametrize("eps", [0.0, 0.1, 0.3])
def test_the_sync_free_loss_has_the_old_values_and_cross_entropys(eps):
    torch.manual_seed(1)
    logits = torch.randn(4, 7, 33, requires_grad=True)
    target = torch.randint(1, 33, (4, 7))
    target[1, 3:] = PAD
    target[3, 1:] = PAD
    new, ref = label_smoothed_nll(logits, target, eps, PAD), reference_loss(logits, target, eps, PAD)
    for a, b in zip(new, ref):
        torch.testing.assert_close(a.float(), b.float(), rtol=1e-6, atol=1e-5)
    ce = F.cross_entropy(logits.view(-1, 33), target.view(-1), ignore_index=PAD, label_smoothing=eps, reduction="sum")
    torch.testing.assert_close(new[0], ce, rtol=1e-6, atol=1e-5)
    g_new, = torch.autograd.grad(new[0], logits)
    g_ref, = torch.autograd.grad(ref[0], logits)
    torch.testing.assert_close(g_new, g_ref, rtol=1e-6, atol=1e-7)
    assert new[2].item() == (target != PAD).sum().item()


def test_bf16_logits_give_a_float32_loss():
    logits = torch.randn(2, 3, 11).bfloat16()
    loss, nll, n = label_smoothed_nll(logits, torch.randint(1, 11, (2, 3)), 0.1, PAD)
    assert loss.dtype == nll.dtype == torch.float32


# ---------------------------------------------------------------- devices --

def test_device_names_resolve_to_this_process_s_gpu():
    assert resolve_device("cuda", local_rank=3, cuda_available=True) == torch.device("cuda", 3)
    assert resolve_device("cuda:1", local_rank=3, cuda_available=True) == torch.device("cuda", 1)
    assert resolve_device(None, local_rank=2, cuda_available=True) == torch.device("cuda", 2)
    assert resolve_device(None, cuda_available=False) == torch.device("cpu")
    assert resolve_device("cpu", cuda_available=True) == torch.device("cpu")
    with pytest.raises(ValueError, match="no CUDA GPU"):
        resolve_device("cuda", cuda_available=False)


def test_adam_is_fused_where_the_parameters_allow_it():
    optimizer, _ = build_optimizer(torch.nn.Linear(3, 3), 16)
    assert optimizer.defaults["fused"]
    optimizer, _ = build_optimizer([torch.nn.Parameter(torch.ones(2, dtype=torch.float64)), torch.ones(1)], 16)
    assert optimizer.defaults["fused"]
    optimizer, _ = build_optimizer(torch.nn.Linear(3, 3), 16, fused=False)
    assert not optimizer.defaults["fused"]


# ------------------------------------------------------------- checkpoints --

def test_checkpoints_hold_only_plain_data_and_restore_the_random_state(tmp_path):
    state = capture_rng()
    expected = (torch.rand(3), np.random.rand(3), __import__("random").random())
    save_checkpoint(tmp_path, 7, {"model": {"w": torch.ones(2)}, "rng": state, "vocab": b"\x00\xff bytes"}, keep=2)
    ckpt, path = load_latest_checkpoint(tmp_path)          # loaded with weights_only=True
    assert path.name == "step_0000007.pt" and ckpt["vocab"] == b"\x00\xff bytes"
    restore_rng(ckpt["rng"])
    again = (torch.rand(3), np.random.rand(3), __import__("random").random())
    assert torch.equal(expected[0], again[0]) and np.array_equal(expected[1], again[1]) and expected[2] == again[2]


def test_a_checkpoint_holding_a_python_object_is_refused(tmp_path):
    save_checkpoint(tmp_path, 1, {"model": {"w": torch.ones(1)}}, keep=5)
    torch.save({"model": {"w": torch.ones(1)}, "payload": fractions.Fraction(1, 3)},
               tmp_path / "checkpoints" / "step_0000002.pt")
    with pytest.raises(CheckpointError, match=r"step_0000002.pt holds Python objects other than tensors"):
        load_checkpoint(tmp_path / "checkpoints" / "step_0000002.pt")
    with pytest.raises(CheckpointError):         # no silent fall-back to the older file either
        load_latest_checkpoint(tmp_path)


# ------------------------------------------------------------ --set parsing --

def test_set_reads_python_literals_with_a_string_fallback():
    p = get_profile("tiny")
    assert parse_overrides(["max_steps=5", "model.P_drop=0.3", "max_minutes=None", "amp=False",
                            "model.positional=learned", "lr_factor=1"], p) == \
        {"max_steps": 5, "model": {"P_drop": 0.3, "positional": "learned"}, "max_minutes": None, "amp": False,
         "lr_factor": 1}


@pytest.mark.parametrize("item, message", [
    ("steps=5", r"--set steps: unknown field 'steps'; choose from corpus, preset"),
    ("model.heads=4", r"--set model.heads: unknown field 'heads'; choose from N, P_drop"),
    ("max_steps=abc", r"max_steps must be of type int \| None, got 'abc'"),
    ("max_steps=2.5", r"max_steps must be of type int \| None, got 2.5"),
    ("model.P_drop=1.5", r"P_drop must be in \[0, 1\)"),
    ("model.positional=rope", r"positional must be 'sinusoidal' or 'learned'"),
    ("name=other", r"unknown field 'name'"),
    ("max_steps", r"key=value"),
])
def test_set_errors_name_the_key_and_the_problem(item, message):
    with pytest.raises(ValueError, match=message):
        parse_overrides([item], get_profile("tiny"))


# ---------------------------------------------------------- checkpoint cadence --

def test_checkpoints_for_averaging_are_written_by_steps_at_the_paper_s_cadence():
    assert steps_per_interval(100_000, 12) == 1389 and steps_per_interval(300_000, 84) == 595
    for name, every in (("wmt14-base", 1389), ("wmt14-big", 595)):
        p = PROFILES[name]
        assert p.save_every_steps == every and p.save_every_minutes is None
        assert (p.average_last - 1) * every / p.max_steps < 0.1     # the average spans the last few percent


# ---------------------------------------------------------------- batches --

@pytest.mark.parametrize("world, max_tokens", [(1, 400), (2, 400), (3, 250), (4, 120)])
def test_a_step_splits_into_an_equal_share_per_device(world, max_tokens):
    data = toy_data(300)
    sizes = np.maximum(data.src.lengths(), data.tgt.lengths()) + 1
    for step in token_batches(sizes, sizes, 1200, seed=1)[:10]:
        if len(step) < world:
            continue
        parts = split_batch(step, sizes, max_tokens, world)
        assert len(parts) % world == 0 and all(len(p) for p in parts)
        assert all(len(p) * sizes[p].max() <= max_tokens for p in parts)
        assert sorted(np.concatenate(parts).tolist()) == sorted(step.tolist())
    with pytest.raises(ValueError, match="cannot be shared by 4 devices"):
        split_batch(np.arange(3), sizes, 1000, 4)


def test_prefetching_feeds_the_same_batches_and_stream_states():
    data = toy_data(300)
    fed = []
    for prefetch in (False, True):
        feeder = StepFeeder(data, BatchStream(data, 600, seed=3), 200, Runtime(), V, seed=3, prefetch=prefetch)
        fed.append([feeder.get(step) for step in range(6)])
        feeder.close()
    for a, b in zip(*fed):
        assert a.stream_state == b.stream_state and a.seeds == b.seeds and a.n_tgt == b.n_tgt
        assert all(torch.equal(x, y) for pa, pb in zip(a.batches, b.batches) for x, y in zip(pa, pb))


def test_one_training_step_matches_a_hand_written_step():
    torch.manual_seed(0)
    data = toy_data(50)
    batches = [collate(data, np.arange(0, 4)), collate(data, np.arange(4, 10))]
    n_tgt = sum(int((b[2] != PAD).sum()) for b in batches)
    models = [tiny_model(P_drop=0.0), tiny_model(P_drop=0.0)]
    models[1].load_state_dict(models[0].state_dict())
    opts = [build_optimizer(m, 64, warmup_steps=10) for m in models]
    sums = train_step(models[0], *opts[0], batches, n_tgt, 0.1, PAD, Runtime(), amp=False)
    # by hand: one mean over all target tokens of the step, cross-entropy with label smoothing
    logits = [models[1](s, ti) for s, ti, _ in batches]
    total = sum(F.cross_entropy(lg.flatten(0, 1), to.flatten(), ignore_index=PAD, label_smoothing=0.1,
                                reduction="sum") for lg, (_, _, to) in zip(logits, batches))
    (total / n_tgt).backward()
    opts[1][0].step()
    torch.testing.assert_close(sums[0], total.detach(), rtol=1e-5, atol=1e-4)
    for (k, a), b in zip(models[0].state_dict().items(), models[1].state_dict().values()):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6, msg=k)
    assert math.isclose(opts[0][0].param_groups[0]["lr"], 2 * opts[1][0].param_groups[0]["lr"], rel_tol=1e-9)


# ------------------------------------------------------------ shape classes --

def test_shape_classes_hold_every_sentence_once_each_batch_within_its_class():
    data = toy_data(400)
    for pad_to in (8, 16):
        stream = BatchStream(data, max_tokens=300, seed=0, pad_to=pad_to)
        sizes = np.maximum(stream.src_len, stream.tgt_len)
        batches = stream.batches(0)
        assert sorted(np.concatenate(batches).tolist()) == list(range(400))
        shapes = set()
        for batch in batches:
            rows, length = batch_shape(int(sizes[batch].max()), 300, pad_to)
            assert len(batch) <= rows and length % pad_to == 0 and rows * length <= 300
            src, tgt_in, tgt_out = collate(data, batch, shape=(rows, length))
            assert src.shape == tgt_in.shape == tgt_out.shape == (rows, length)
            assert (src[len(batch):] == PAD).all() and (tgt_out[len(batch):] == PAD).all()
            shapes.add((rows, length))
        # one shape per padded length, where token batches as they are have many
        assert len(shapes) <= -(-int(sizes.max()) // pad_to)
        as_they_are = {(len(b), int(sizes[b].max())) for b in BatchStream(data, 300).batches(0)}
        assert len(as_they_are) > 3 * len(shapes)
    with pytest.raises(ValueError, match=r"do not fit the shape \(2, 8\)"):
        collate(data, np.arange(3), shape=(2, 8))
    with pytest.raises(ValueError, match="does not fit in max_tokens=20"):
        BatchStream(data, max_tokens=20, pad_to=32).batches(0)


def test_rows_of_padding_change_neither_the_loss_nor_the_gradient():
    data = toy_data(50)
    idx = np.arange(5)
    model = tiny_model(P_drop=0.0).double()

    def loss_and_grads(shape):
        model.zero_grad()
        src, tgt_in, tgt_out = collate(data, idx, shape=shape)
        loss = label_smoothed_nll(model(src, tgt_in), tgt_out, 0.1, PAD)[0]
        loss.backward()
        return loss.detach(), [p.grad.clone() for p in model.parameters()]

    loss, grads = loss_and_grads(None)
    padded_loss, padded_grads = loss_and_grads((16, 32))
    # the loss is summed in float32 (chapter 5.4); only its rounding may differ
    assert torch.allclose(loss, padded_loss, rtol=1e-6)
    worst = max(((a - b).abs().max() / a.abs().max().clamp_min(1e-12)).item()
                for a, b in zip(grads, padded_grads))
    assert worst < 1e-12, worst
    assert all(torch.isfinite(g).all() for g in padded_grads)


def test_a_compiled_profile_feeds_few_shapes_over_an_epoch_on_every_device():
    data = toy_data(2000)
    profile = get_profile("tiny").replace(compile=True, max_tokens=256, tokens_per_step=1024)
    assert profile.batch_pad_to == 8
    for world in (1, 2):
        shapes, feeders = set(), []
        for rank in range(world):
            stream = training_stream(data, profile)
            feeders.append(StepFeeder(data, stream, profile.max_tokens, Runtime(rank, world), V,
                                      profile.seed, tokens_per_step=profile.tokens_per_step))
        step = 0
        while feeders[0].stream.epoch == 0:
            items = [f.get(step) for f in feeders]
            assert len({len(item.batches) for item in items}) == 1     # an equal share
            assert len({item.n_tgt for item in items}) == 1            # the same step
            for item in items:
                for src, tgt_in, tgt_out in item.batches:
                    shapes.add(tuple(src.shape) + tuple(tgt_in.shape))
            step += 1
        sizes = np.maximum(feeders[0].stream.src_len, feeders[0].stream.tgt_len)
        # the bound: one shape per padded length; every shape a multiple of 8 both ways
        assert len(shapes) <= -(-int(sizes.max()) // 8), shapes
        assert all(s % 8 == 0 for shape in shapes for s in shape)
        assert step > 20
    eager = get_profile("tiny").replace(max_tokens=256, tokens_per_step=1024)
    feeder = StepFeeder(data, training_stream(data, eager), 256, Runtime(), V, 1)
    as_they_are = {tuple(b[0].shape) + tuple(b[1].shape) for i in range(step) for b in feeder.get(i).batches}
    assert len(as_they_are) > 4 * len(shapes)
