"""Chapter 6.2's sweep: scaled rows, run order, one row end to end (train, score, record, resume), verdicts."""
import json

import pytest

from tests.conftest import need_corpus
from transformer.model import PRESETS
from transformer.paper import TABLE3
from transformer.variations import (ROWS, SWEEP, compare, load_records, main, record_path, row_profile, run_row,
                                    scaled_config, seed_spread, sweep_plan)


def test_table3_rows_are_the_presets_and_every_row_scales():
    assert ROWS == [r for r in PRESETS if r not in ("small", "tiny")] and len(ROWS) == 20
    for row in ROWS:
        cfg = scaled_config(row)
        for key in ("d_model", "d_ff", "d_k", "d_v"):
            assert getattr(cfg, key) * 4 == PRESETS[row][key], (row, key)
        for key in ("N", "h", "P_drop", "eps_ls"):
            assert getattr(cfg, key) == PRESETS[row][key], (row, key)
    assert scaled_config("E").positional == "learned" and scaled_config("big").P_drop == 0.3


def test_bad_rows_and_scales_are_refused_by_name():
    with pytest.raises(ValueError, match="unknown Table 3 row 'A9'"):
        scaled_config("A9")
    with pytest.raises(ValueError, match="not divisible by scale 3"):
        scaled_config("base", scale=3)
    with pytest.raises(ValueError, match="unknown Table 3 row 'small'"):
        sweep_plan(["small"])


def test_plan_runs_the_noise_seeds_first_and_each_row_once():
    plan = sweep_plan()
    assert plan[:3] == [("base", 1), ("base", 2), ("base", 3)] and len(plan) == 22
    assert [r for r, _ in plan[3:]] == ROWS[1:]
    assert sweep_plan(["C1", "A1"]) == [("C1", 1), ("A1", 1)]
    profile = row_profile("C5", seed=2)
    assert profile.name == "table3-cpu-C5-seed2" and profile.seed == 2 and profile.preset == "C5"
    assert profile.model == {"d_model": 256, "d_ff": 512, "d_k": 32, "d_v": 32}
    assert SWEEP.max_steps % SWEEP.eval_every == 0          # a dev perplexity exists at the last step


def test_verdicts_compare_with_the_seed_spread():
    assert compare(True, 2.0, 1.0) == "reproduced"
    assert compare(False, 2.0, 1.0) == "reversed"
    assert compare(False, 0.5, 1.0) == compare(True, 1.0, 1.0) == "within noise"
    assert compare(True, 5.0, None) == "no noise estimate"
    records = {("base", 1): {"dev_bleu": 5.0}, ("base", 2): {"dev_bleu": 6.5}, ("A1", 1): {"dev_bleu": 9.0}}
    assert seed_spread(records, "dev_bleu") == 1.5
    assert seed_spread({("base", 1): {"dev_bleu": 5.0}}, "dev_bleu") is None


def test_one_row_end_to_end_writes_a_record_and_resumes(tmp_path, monkeypatch):
    root = need_corpus("multi30k", "train", "dev")
    small = SWEEP.replace(train_pairs=400, vocab_size=500, max_steps=4, eval_every=2, save_every_steps=2,
                          warmup_steps=2)
    record = run_row("C1", 1, tmp_path / "runs", tmp_path / "results", base=small, data_root=root,
                     dev_sentences=5, progress=False, command="test")
    stored = json.loads(record_path(tmp_path / "results", "C1", 1).read_text())
    assert stored == record and record["steps"] == 4 and record["dev_sentences"] == 5
    assert record["config"]["N"] == 2 and record["config"]["d_model"] == 128 and record["paper"] == TABLE3["C1"]
    assert record["dev_ppl"] > 1 and 0 <= record["dev_bleu"] <= 100 and record["command"] == "test"
    for key in ("commit", "date", "hardware", "profile", "train_minutes", "parameters"):
        assert key in record
    # asking again reads the record: training would fail now that the data folder is gone
    monkeypatch.setattr("transformer.variations.train", lambda *a, **k: pytest.fail("trained again"))
    assert run_row("C1", 1, tmp_path / "runs", tmp_path / "results", base=small) == record
    assert load_records(tmp_path / "results") == {("C1", 1): record}


def test_the_command_lists_rows_and_refuses_unknown_ones(tmp_path, capsys):
    (tmp_path / "A1-seed1.json").write_text("{}")
    main(["A1", "B2", "--list", "--results", str(tmp_path)])
    out = capsys.readouterr().out
    assert "A1    seed 1: done" in out and "B2    seed 1: to run" in out
    with pytest.raises(SystemExit):
        main(["Z1", "--list"])
    assert "unknown Table 3 row 'Z1'" in capsys.readouterr().err
