"""Appendix A's splits: the tutorial's (all test pairs memorisable) and ours (nothing seen in training)."""
import pytest

from tests.conftest import need_seed_folder
from transformer.corpora import load_split, prepare_zh_en


def test_prepare_zh_en_writes_both_splits_without_leaks(tmp_path):
    need_seed_folder("zh-en-seed", "en.txt", "cn.txt", "en.test.txt", "cn.test.txt")
    counts = prepare_zh_en(tmp_path)
    assert counts["tutorial_train"] == 6834 and counts["tutorial_test"] == 683
    assert counts["tutorial_test_in_tutorial_train"] == 683
    assert (counts["dev"], counts["test"]) == (300, 500)
    train = load_split("zh-en", "train", tmp_path)
    held = load_split("zh-en", "dev", tmp_path) + load_split("zh-en", "test", tmp_path)
    assert not {en for en, _ in train} & {en for en, _ in held}
    assert len(set(held)) == 800 and len(train) == counts["train"]
    assert load_split("zh-en-tutorial", "test", tmp_path) == load_split("zh-en-tutorial", "dev", tmp_path)
    assert prepare_zh_en(tmp_path) == counts            # deterministic


def test_missing_or_tiny_seed_corpora_are_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="P3n9W31/transformer-pytorch"):
        prepare_zh_en(tmp_path / "out", seed_root=tmp_path)
    seed = tmp_path / "zh-en-seed"
    seed.mkdir()
    for name in ("en.txt", "cn.txt", "en.test.txt", "cn.test.txt"):
        (seed / name).write_text("a b\n" * 3)
    with pytest.raises(ValueError, match="too few"):
        prepare_zh_en(tmp_path / "out", seed_root=tmp_path)
    (seed / "cn.txt").write_text("a\n")
    with pytest.raises(ValueError, match="misaligned"):
        prepare_zh_en(tmp_path / "out", seed_root=tmp_path)
    with pytest.raises(FileNotFoundError, match="prepare_zh_en"):
        load_split("zh-en", "train", tmp_path / "none")
