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


def test_the_zh_en_command_trains_both_runs_until_dev_stops_and_writes_its_record(tmp_path, monkeypatch):
    """scripts/zh_en.py end to end, made small: the first 1,200 tutorial pairs, a 1-layer model, rounds
    of 2 steps; a second call finds both runs done and writes the same choices."""
    import json
    import sys
    from pathlib import Path

    from tests.conftest import need_seed_folder
    from transformer.corpora import data_dir
    need_seed_folder("zh-en-seed", "en.txt", "cn.txt")
    seed = tmp_path / "seed" / "zh-en-seed"
    seed.mkdir(parents=True)
    for name in ("en.txt", "cn.txt"):
        lines = (data_dir() / "zh-en-seed" / name).read_text(encoding="utf-8").splitlines()
        (seed / name).write_text("\n".join(lines[:1200]) + "\n", encoding="utf-8")
    for name in ("en.test.txt", "cn.test.txt"):
        lines = (data_dir() / "zh-en-seed" / name).read_text(encoding="utf-8").splitlines()
        (seed / name).write_text("\n".join(lines[:40]) + "\n", encoding="utf-8")
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
    try:
        import zh_en as script
    finally:
        sys.path.pop(0)
    monkeypatch.setattr(script, "PROFILE", script.PROFILE.replace(
        model={"N": 1, "d_model": 32, "d_ff": 64, "h": 2, "d_k": 16, "d_v": 16}, vocab_size=2200,
        save_every_steps=2, eval_every=2, warmup_steps=2, round_steps=2, patience=1, min_rounds=1,
        max_rounds=2))
    monkeypatch.setattr(script, "BEAM", 2)
    argv = ["--runs", str(tmp_path / "runs"), "--results", str(tmp_path / "results"),
            "--seed-dir", str(tmp_path / "seed")]
    script.main(argv)
    record = json.loads((tmp_path / "results" / "results.json").read_text(encoding="utf-8"))
    for corpus in ("zh-en", "zh-en-tutorial"):
        r = record[corpus]
        assert 1 <= len(r["dev_curve"]) <= 2 and r["chosen"]["dev_bleu"] == max(
            p["dev_bleu"] for p in r["dev_curve"])
        assert r["train_ppl"] > 1 and r["dev_ppl"] > 1 and 0 <= r["test_repeats"] <= 1
        hyps = (tmp_path / "results" / f"{corpus}.test.zh").read_text(encoding="utf-8").splitlines()
        assert len(hyps) == r["test_sentences"]
    assert record["memorisation_gap"] == round(
        record["zh-en-tutorial"]["test_bleu"] - record["zh-en"]["test_bleu"], 2)
    assert {"date", "commit", "hardware", "command"} <= set(record)
    script.main(argv)
    again = json.loads((tmp_path / "results" / "results.json").read_text(encoding="utf-8"))
    assert all(again[c]["dev_curve"] == record[c]["dev_curve"] for c in ("zh-en", "zh-en-tutorial"))
