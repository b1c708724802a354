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


def test_the_fit_mode_scores_one_model_on_seen_and_held_out_pairs(tmp_path, monkeypatch):
    """scripts/zh_en.py --fit made small: the cure read from the parser pilot's choice (refused without
    one), rounds until the model fits or FIT_ROUNDS, then one model scored on the tutorial's test pairs
    that it trained on and on held-out test pairs."""
    import json
    import sys
    from pathlib import Path

    from transformer.corpora import data_dir
    need_seed_folder("zh-en-seed", "en.txt", "cn.txt", "en.test.txt", "cn.test.txt")
    seed = tmp_path / "seed" / "zh-en-seed"
    seed.mkdir(parents=True)
    # the tutorial's test pairs are its training pairs: keep the first 40 of each, and put them in training
    test = {n: (data_dir() / "zh-en-seed" / n).read_text(encoding="utf-8").splitlines()[:40]
            for n in ("en.test.txt", "cn.test.txt")}
    for name, test_name in (("en.txt", "en.test.txt"), ("cn.txt", "cn.test.txt")):
        lines = (data_dir() / "zh-en-seed" / name).read_text(encoding="utf-8").splitlines()[:1200]
        (seed / name).write_text("\n".join(lines + test[test_name]) + "\n", encoding="utf-8")
        (seed / test_name).write_text("\n".join(test[test_name]) + "\n", encoding="utf-8")
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
    try:
        import zh_en as script
    finally:
        sys.path.pop(0)
    monkeypatch.setattr(script, "PROFILE", script.PROFILE.replace(
        model={"N": 1, "d_model": 32, "d_ff": 64, "h": 2, "d_k": 16, "d_v": 16, "P_drop": 0.3}, vocab_size=2200,
        save_every_steps=2, eval_every=2, warmup_steps=2, round_steps=2))
    for name, value in (("BEAM", 2), ("FIT_ROUNDS", 2), ("SEEN_PER_ROUND", 5)):
        monkeypatch.setattr(script, name, value)
    pilot = tmp_path / "results" / "parsing-pilot"
    argv = ["--runs", str(tmp_path / "runs"), "--results", str(tmp_path / "results" / "zh-en-fit"),
            "--seed-dir", str(tmp_path / "seed"), "--pilot-results", str(pilot)]
    with pytest.raises(SystemExit, match="has none yet"):
        script.main(argv)
    pilot.mkdir(parents=True)
    (pilot / "results.json").write_text(json.dumps({"chosen": {"setting": "f0.25-p0.1"}}))
    (pilot / "f0.25-p0.1.json").write_text(json.dumps({"lr_factor": 0.25, "model": {"P_drop": 0.1}}))
    script.main(argv)
    out = tmp_path / "results" / "zh-en-fit"
    record = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert record["cure"]["lr_factor"] == record["lr_factor"] == 0.25 and record["model"]["P_drop"] == 0.1
    assert record["cure"]["from"].endswith("parsing-pilot/results.json")
    stopped = record["training"]["stopped_by"]
    assert 1 <= len(record["dev_curve"]) <= 2 and (stopped == "2 rounds" or stopped.startswith("fits"))
    seen = script.seen_pairs(tmp_path / "runs" / "data")
    assert record["seen"]["sentences"] == len(seen) > 0 and record["test"]["sentences"] == 500
    for name in ("seen", "test"):
        hyps = (out / f"{name}.zh").read_text(encoding="utf-8").splitlines()
        refs = [t for _, t in (seen if name == "seen" else load_split("zh-en", "test", tmp_path / "runs" / "data"))]
        assert len(hyps) == record[name]["sentences"] and record[name]["exact"] == round(script.exact_rate(hyps, refs), 4)
    assert record["memorisation_gap"] == round(record["seen"]["bleu"] - record["test"]["bleu"], 2)
    assert all(0 <= p["seen_exact"] <= 1 and p["seen_ppl"] > 1 for p in record["dev_curve"])
    assert script.exact_rate(["我 们 好"], ["我们 好"]) == 1.0 and script.exact_rate(["我们"], ["我们 好"]) == 0.0
    assert script.fits([{"seen_exact": 0.5, "seen_ppl": 9.0}]).startswith("fits")
    assert script.fits([{"seen_exact": 0.1, "seen_ppl": 3.0}]).startswith("fits")
    assert script.fits([{"seen_exact": 0.49, "seen_ppl": 3.01}]) is None and script.fits([]) is None
