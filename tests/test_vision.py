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
