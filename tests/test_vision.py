"""Appendix B: patch embedding order and errors, the Vision Transformer's shapes and gradients."""
import pytest
import torch

from transformer.model import TransformerConfig
from transformer.vision import PatchEmbedding, VisionTransformer


def test_patches_are_cut_row_by_row():
    embed = PatchEmbedding(image_size=4, patch_size=2, channels=2, d_model=8)
    with torch.no_grad():
        embed.proj.weight.copy_(torch.eye(8))
        embed.proj.bias.zero_()
    image = torch.arange(32.0).view(1, 2, 4, 4)
    patches = embed(image)
    assert patches.shape == (1, 4, 8)
    # patch 1 is the top-right 2x2 square: channel 0 first, then channel 1
    assert patches[0, 1].tolist() == [2, 3, 6, 7, 18, 19, 22, 23]
    assert patches[0, 2].tolist() == [8, 9, 12, 13, 24, 25, 28, 29]


def test_bad_images_and_sizes_are_refused():
    with pytest.raises(ValueError, match="not a multiple of the patch size"):
        PatchEmbedding(image_size=8, patch_size=3, channels=1, d_model=4)
    embed = PatchEmbedding(image_size=8, patch_size=2, channels=1, d_model=4)
    with pytest.raises(ValueError, match=r"expected images of shape \[B, 1, 8, 8\], got \[1, 3, 8, 8\]"):
        embed(torch.zeros(1, 3, 8, 8))
    with pytest.raises(ValueError, match="expected images"):
        embed(torch.zeros(8, 8))


def test_the_classifier_reads_the_class_token_and_learns():
    cfg = TransformerConfig(N=2, d_model=16, d_ff=32, h=2, P_drop=0.0, norm_first=True)
    vit = VisionTransformer(cfg, image_size=8, patch_size=2, channels=1, classes=3)
    images = torch.randn(5, 1, 8, 8)
    logits = vit(images)
    assert logits.shape == (5, 3)
    assert vit.tokens(images).shape == (5, 17, 16)
    logits.sum().backward()
    assert vit.cls_token.grad.abs().sum() > 0 and vit.positions.grad.abs().sum() > 0
    # the output depends on every patch: changing one pixel of the last patch changes the logits
    vit.eval()
    changed = images.clone()
    changed[0, 0, 7, 7] += 1.0
    with torch.no_grad():
        assert not torch.allclose(vit(changed)[0], vit(images)[0])
        assert torch.allclose(vit(changed)[1:], vit(images)[1:])
    # a few steps on two separable classes drive the loss down
    x = torch.cat([torch.zeros(8, 1, 8, 8), torch.ones(8, 1, 8, 8)])
    y = torch.tensor([0] * 8 + [1] * 8)
    vit.train()
    opt = torch.optim.Adam(vit.parameters(), lr=1e-2)
    first = None
    for _ in range(30):
        loss = torch.nn.functional.cross_entropy(vit(x), y)
        first = first if first is not None else loss.item()
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < 0.1 * first


def test_the_digits_split_is_fixed_and_stratified():
    from transformer.vision import digits_split
    X_train, y_train, X_test, y_test = digits_split()
    assert X_train.shape == (1437, 1, 8, 8) and X_test.shape == (360, 1, 8, 8)
    assert 0 <= X_train.min() and X_train.max() <= 1
    # every digit is a tenth of the test set, give or take one image
    assert all(35 <= n <= 37 for n in torch.bincount(y_test).tolist())
    again = digits_split()
    assert torch.equal(again[2], X_test) and torch.equal(again[3], y_test)


def test_train_classifier_learns_and_reports_every_epoch():
    from transformer.vision import accuracy, train_classifier
    cfg = TransformerConfig(N=1, d_model=16, d_ff=32, h=2, P_drop=0.0, eps_ls=0.0, norm_first=True)
    torch.manual_seed(0)
    vit = VisionTransformer(cfg, image_size=8, patch_size=4, channels=1, classes=2)
    x = torch.cat([torch.zeros(16, 1, 8, 8), torch.ones(16, 1, 8, 8)])
    y = torch.tensor([0] * 16 + [1] * 16)
    history = train_classifier(vit, x, y, epochs=15, batch_size=8, warmup_epochs=1,
                               lr_factor=1.0, evaluate=lambda m: accuracy(m, x, y))
    assert len(history) == 15 and history[-1][0] < 0.2 * history[0][0]
    assert history[-1][1] == 1.0 and not vit.training


def _vision_script():
    import importlib.util
    from pathlib import Path
    path = Path(__file__).resolve().parent.parent / "scripts" / "vision.py"
    spec = importlib.util.spec_from_file_location("vision_script", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_study_chooses_the_rate_on_validation_resumes_and_refuses_a_foreign_record(
        tmp_path, monkeypatch):
    import json
    script = _vision_script()
    ran, killed = [], []
    val_size = int(0.2 * 1437) + 1    # the validation part of the training images

    def fake_run(seed, lr_factor, train, evaluate_on):
        ran.append((lr_factor, seed, len(evaluate_on[1])))
        if len(ran) == 5 and not killed:
            killed.append(seed)
            raise RuntimeError("killed")   # killed during the fifth run
        # validation prefers 0.3; test accuracy is never looked at for the choice
        acc = {0.3: 0.9}.get(lr_factor, 0.5) if len(evaluate_on[1]) != 360 else 0.99
        return {"seed": seed, "lr_factor": lr_factor, "accuracy": acc, "minutes": 0.0}

    monkeypatch.setattr(script, "one_run", fake_run)
    monkeypatch.setattr(script, "baseline_accuracy", lambda *data: 0.95)
    out = tmp_path / "results.json"
    with pytest.raises(RuntimeError, match="killed"):
        script.main(["--out", str(out)])
    record = json.loads(out.read_text())
    assert len(record["validation"]) == 4                     # what finished is kept
    assert record["kernel_path"] == torch.backends.cpu.get_cpu_capability()
    ran.clear()
    script.main(["--out", str(out)])
    record = json.loads(out.read_text())
    n_choice = len(script.FACTORS) * len(script.CHOICE_SEEDS)
    assert len(ran) == n_choice - 4 + len(script.TEST_SEEDS)   # only the runs not yet done
    assert all(n == val_size for _, _, n in ran[:n_choice - 4])
    assert record["chosen_lr_factor"] == 0.3
    assert [r["lr_factor"] for r in record["test"]] == [0.3] * len(script.TEST_SEEDS)
    assert all(n == 360 for _, _, n in ran[n_choice - 4:])

    record["training"]["epochs"] = 10          # a record made with other settings
    out.write_text(json.dumps(record))
    with pytest.raises(SystemExit, match="other settings"):
        script.main(["--out", str(out)])
    out.write_text("{not json")
    with pytest.raises(SystemExit, match="not a results record"):
        script.main(["--out", str(out)])
    assert out.read_text() == "{not json"     # nothing overwritten
