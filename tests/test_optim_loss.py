"""Equation (3) and Adam's settings; the label-smoothed loss."""
import math

import pytest
import torch
import torch.nn.functional as F

from transformer.loss import label_smoothed_nll
from transformer.optim import build_optimizer, rate


def test_rate_is_equation_3():
    for step in (1, 10, 3999, 4000, 4001, 100_000):
        expected = 512 ** -0.5 * min(step ** -0.5, step * 4000 ** -1.5)
        assert rate(step, 512, 4000) == pytest.approx(expected, rel=1e-12)
    assert rate(0, 512) == rate(1, 512)
    assert rate(100, 256, 50, factor=2.0) == pytest.approx(2 * 256 ** -0.5 * 100 ** -0.5)


def test_scheduler_follows_the_formula_and_adam_uses_the_paper_settings():
    p = torch.nn.Parameter(torch.zeros(3))
    opt, sched = build_optimizer([p], d_model=64, warmup_steps=10)
    assert opt.param_groups[0]["betas"] == (0.9, 0.98) and opt.param_groups[0]["eps"] == 1e-9
    for step in range(1, 30):
        assert opt.param_groups[0]["lr"] == pytest.approx(rate(step, 64, 10), rel=1e-12)
        p.grad = torch.ones(3)
        opt.step()
        sched.step()
    state = sched.state_dict()
    _, sched2 = build_optimizer([torch.nn.Parameter(torch.zeros(3))], 64, 10)
    sched2.load_state_dict(state)
    assert sched2.last_epoch == sched.last_epoch


@pytest.mark.parametrize("eps", [0.0, 0.1, 0.2])
def test_label_smoothing_matches_torch(eps):
    logits = torch.randn(4, 6, 13, dtype=torch.float64)
    target = torch.randint(1, 13, (4, 6))
    target[1, 4:] = 0
    loss, nll, n = label_smoothed_nll(logits, target, eps, pad_id=0)
    ref = F.cross_entropy(logits.view(-1, 13), target.view(-1), ignore_index=0, label_smoothing=eps, reduction="sum")
    plain = F.cross_entropy(logits.view(-1, 13), target.view(-1), ignore_index=0, reduction="sum")
    assert loss.item() == pytest.approx(ref.item(), rel=1e-5)
    assert nll.item() == pytest.approx(plain.item(), rel=1e-5)
    assert n.item() == 22


def test_padding_positions_do_not_count():
    logits = torch.randn(1, 3, 5, requires_grad=True)
    loss, _, _ = label_smoothed_nll(logits, torch.tensor([[1, 0, 0]]), 0.1, pad_id=0)
    loss.backward()
    assert logits.grad[0, 1:].abs().sum() == 0


def test_smoothed_optimum_is_not_certainty():
    # the loss-minimising distribution puts 1 - eps + eps/V on the reference
    V, eps = 7, 0.1
    best = torch.full((V,), eps / V)
    best[2] += 1 - eps
    logits = best.log().requires_grad_()
    loss, _, _ = label_smoothed_nll(logits[None, None], torch.tensor([[2]]), eps, pad_id=0)
    loss.backward()
    assert logits.grad.abs().max() < 1e-6


def test_shape_mismatch_is_an_error():
    with pytest.raises(ValueError, match="do not match"):
        label_smoothed_nll(torch.randn(2, 3, 5), torch.ones(2, 4, dtype=torch.long), 0.1, 0)


def test_defaults_are_the_paper_s_warmup_and_factor():
    assert rate(1, 512) == pytest.approx(512 ** -0.5 * 4000 ** -1.5)
    p = torch.nn.Parameter(torch.zeros(1))
    opt, _ = build_optimizer([p], 512)
    assert opt.param_groups[0]["lr"] == pytest.approx(512 ** -0.5 * 4000 ** -1.5)
    opt, _ = build_optimizer([torch.nn.Parameter(torch.zeros(1))], 512, warmup_steps=10, factor=2.0)
    assert opt.param_groups[0]["lr"] == pytest.approx(2 * 512 ** -0.5 * 10 ** -1.5)


class FakeParam:
    """Stands in for a parameter on a device this machine lacks: build_optimizer reads only these."""
    def __init__(self, device, floating=True):
        self.device, self.floating = torch.device(device), floating

    def is_floating_point(self):
        return self.floating


@pytest.mark.parametrize("devices, floating, fused", [
    (["cuda"], True, True), (["cpu"], True, True), (["cuda", "cuda"], True, True),
    (["cuda", "cpu"], True, False), (["meta"], True, False), (["cuda"], False, False),
])
def test_fused_adam_is_chosen_for_one_cpu_or_cuda_device_of_floats(monkeypatch, devices, floating, fused):
    chosen = {}
    monkeypatch.setattr(torch.optim, "Adam", lambda params, **kw: chosen.update(kw))
    monkeypatch.setattr(torch.optim.lr_scheduler, "LambdaLR", lambda *a, **kw: None)
    build_optimizer([FakeParam(d, floating) for d in devices], 16)
    assert bool(chosen["fused"]) == fused


def test_the_token_count_is_a_float_tensor():
    _, _, n = label_smoothed_nll(torch.randn(2, 3, 5), torch.tensor([[1, 2, 0], [3, 0, 0]]), 0.1, pad_id=0)
    assert n.dtype == torch.float32 and n.item() == 3
