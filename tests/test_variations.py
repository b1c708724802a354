"""Chapter 6.2's sweep: scaled rows, run order, one row end to end (train, score, record, resume), verdicts."""
import json
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from tests.conftest import need_corpus
from transformer.run import checkpoint_file, checkpoint_paths
from transformer.corpora import load_split
from transformer.evaluate import COLLAPSED, sacre_bleu
from transformer.model import PRESETS
from transformer.paper import TABLE3
from transformer import rounds, table3, variations
from transformer.profiles import Setting
from transformer.table3 import (CLAIMS, LONG_SCALE, ROWS, claim_verdicts, compare, load_records, record_path,
                                scaled_config, second_seeds, seed_spread)
from transformer.variations import (LONG, SWEEP, choose_budget, claims_first, main, plateaued, row_epochs,
                                    row_profile, run_row, run_row_epochs, sweep_plan)


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
    # more seeds of a row, named one by one: the noise band's, or a row close to it
    assert sweep_plan(["base:4", "base:5", "A1:3", "D3:2"]) == [("base", 4), ("base", 5), ("A1", 3), ("D3", 2)]
    assert sweep_plan(["C1", "A1:3"]) == [("C1", 1), ("A1", 3)]
    for bad in ("A1:0", "A1:x", "A1:"):
        with pytest.raises(ValueError, match="a seed is a whole number"):
            sweep_plan([bad])
    with pytest.raises(ValueError, match="unknown Table 3 row 'A9'"):
        sweep_plan(["A9:2"])
    profile = row_profile("C5", seed=2)
    assert profile.name == "table3-cpu-C5-seed2" and profile.seed == 2 and profile.preset == "C5"
    assert profile.model == {"d_model": 256, "d_ff": 512, "d_k": 32, "d_v": 32}
    assert SWEEP.max_steps % SWEEP.eval_every == 0          # a dev perplexity exists at the last step


def test_the_converged_sweep_runs_the_rows_of_the_claims_first():
    plan = claims_first(sweep_plan() + [("C3", 2)])
    claimed = {row for _, a, b in CLAIMS for row in (a, b) if row}
    assert plan[:3] == [("base", 1), ("base", 2), ("base", 3)]
    first = [row for row, _ in plan[3:3 + len(claimed) - 1]]
    assert set(first) == claimed - {"base"} and first == [r for r in ROWS if r in first]
    assert sorted(plan) == sorted(sweep_plan() + [("C3", 2)])
    assert plan.index(("C3", 2)) < plan.index(("A2", 1))


def test_verdicts_compare_with_the_seed_spread():
    assert compare(True, 2.0, 1.0) == "reproduced"
    assert compare(False, 2.0, 1.0) == "reversed"
    assert compare(False, 0.5, 1.0) == compare(True, 1.0, 1.0) == "within noise"
    assert compare(True, 5.0, None) == "no noise estimate"
    records = {("base", 1): {"dev_bleu": 5.0}, ("base", 2): {"dev_bleu": 6.5}, ("A1", 1): {"dev_bleu": 9.0}}
    assert seed_spread(records, "dev_bleu") == 1.5
    assert seed_spread({("base", 1): {"dev_bleu": 5.0}}, "dev_bleu") is None


def test_a_verdict_reads_every_seed_of_a_row():
    def rec(row, seed, bleu, ppl):
        return (row, seed), {"row": row, "seed": seed, "dev_bleu": bleu, "dev_ppl": ppl}
    records = dict([rec("base", 1, 25.0, 5.0), rec("base", 2, 25.5, 5.1), rec("base", 3, 26.0, 5.2),
                    rec("A1", 1, 24.0, 6.0)])
    claim = "one head is worse than eight"
    assert claim_verdicts(records)[claim][1] == "reproduced"        # 1.5 BLEU below, spread 1.0
    records.update([rec("A1", 2, 25.4, 6.0)])
    assert claim_verdicts(records)[claim][1] == "within noise"      # the mean is 0.8 below


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
    monkeypatch.setattr("transformer.rounds.train", lambda *a, **k: pytest.fail("trained again"))
    assert run_row("C1", 1, tmp_path / "runs", tmp_path / "results", base=small) == record
    assert load_records(tmp_path / "results") == {("C1", 1): record}


def test_the_command_lists_rows_and_refuses_unknown_ones(tmp_path, capsys):
    (tmp_path / "A1-seed1.json").write_text('{"row": "A1", "seed": 1, "dev_bleu": 1, "dev_ppl": 9}')
    main(["A1", "B2", "--list", "--results", str(tmp_path)])
    out = capsys.readouterr().out
    assert "A1    seed 1: done" in out and "B2    seed 1: to run" in out
    with pytest.raises(SystemExit):
        main(["Z1", "--list"])
    assert "unknown Table 3 row 'Z1'" in capsys.readouterr().err


def curve(*ppl):
    return [{"epoch": i + 1, "dev_ppl": p} for i, p in enumerate(ppl)]


def test_dev_perplexity_levels_off_by_the_protocol_s_rule():
    falling = curve(*[100 * 0.9 ** i for i in range(12)])          # 10% better every epoch
    assert not plateaued(falling)
    flat = curve(*[100 * 0.9 ** i for i in range(8)], *[47.9] * 4)  # the last fifth (3 epochs) gains nothing
    assert plateaued(flat)
    assert not plateaued(flat[:9])                                  # fewer than the minimum epochs
    # 1.5% better over the last fifth: levelled off; 3%: not
    assert plateaued(curve(*[50] * 9, 49.25)) and not plateaued(curve(*[50] * 9, 48.5))


def test_the_converged_sweep_scales_by_8_and_gives_big_three_times_the_budget():
    assert row_profile("base", 1, LONG, LONG_SCALE).model == {"d_model": 64, "d_ff": 256, "d_k": 8, "d_v": 8}
    assert row_profile("A4", 1, LONG, LONG_SCALE).model["d_k"] == 2
    assert row_epochs("big", {"budget_epochs": 7}) == 21 and row_epochs("C3", {"budget_epochs": 7}) == 7


def test_rows_within_the_base_seed_range_get_a_second_seed():
    records = {("base", s): {"dev_bleu": b, "dev_ppl": p} for s, b, p in ((1, 20, 10), (2, 21, 11), (3, 22, 12))}
    records["A1", 1] = {"dev_bleu": 15, "dev_ppl": 20}      # far from base on both
    records["A2", 1] = {"dev_bleu": 21.5, "dev_ppl": 30}    # near by BLEU
    records["A3", 1] = {"dev_bleu": 5, "dev_ppl": 12.5}     # near by perplexity
    records["A4", 1], records["A4", 2] = {"dev_bleu": 21, "dev_ppl": 11}, {"dev_bleu": 21, "dev_ppl": 11}
    assert sorted(second_seeds(records)) == [("A2", 2), ("A3", 2)]
    assert second_seeds({("base", 1): records["base", 1], ("A2", 1): records["A2", 1]}) == []
    # two base seeds of three: no decision yet, whichever runs happened to finish first
    del records["base", 3]
    assert second_seeds(records) == []


class Encoder:
    """A stand-in model whose encoder gives each sentence the rows of `outputs` (as many rows as ids + EOS)."""
    training = True

    def __init__(self, outputs):
        self.outputs, self.modes = outputs, []

    def eval(self):
        self.training = False

    def train(self, mode=True):
        self.training = mode

    def encode(self, src):
        self.modes.append(self.training)
        return torch.tensor([self.outputs[: src.size(1)]], dtype=torch.float)


class Words:
    def encode(self, texts):
        return [[5] * len(t.split()) for t in texts]


def test_encoder_similarity_is_one_for_a_collapsed_encoder_and_zero_for_orthogonal_positions():
    from transformer.evaluate import encoder_similarity
    assert encoder_similarity(Encoder([[3.0, 1.0]] * 4), Words(), ["a b c"]) == pytest.approx(1.0)
    assert encoder_similarity(Encoder(torch.eye(4).tolist()), Words(), ["a b c"]) == pytest.approx(0.0)
    # two equal rows, one orthogonal: 1 similar pair of 3 (length does not matter, direction does)
    model = Encoder([[1.0, 0.0], [5.0, 0.0], [0.0, 2.0]])
    assert encoder_similarity(model, Words(), ["a b"]) == pytest.approx(1 / 3)
    assert model.modes == [False] and model.training     # measured without dropout; the caller's mode is back
    # every pair of every sentence counts once: (1 similar of 3 pairs) + (1 of 1)
    assert encoder_similarity(model, Words(), ["a b", "a"]) == pytest.approx(2 / 4)


def test_the_protocol_then_a_row_end_to_end_with_a_curve_per_epoch(tmp_path, monkeypatch):
    root = need_corpus("multi30k", "train", "dev")
    monkeypatch.setattr(variations, "LONG", LONG.replace(train_pairs=300, vocab_size=400, max_len=40,
                                                         max_tokens=1000, tokens_per_step=1000, warmup_steps=4,
                                                         amp=False))
    monkeypatch.setattr(variations, "RATE_PILOT", replace(variations.RATE_PILOT, settings=tuple(
        s for s in variations.RATE_PILOT.settings if s.changes["lr_factor"] in (0.5, 1.0))))
    monkeypatch.setattr(variations, "PILOT_EPOCHS", 1)
    monkeypatch.setattr(variations, "MIN_EPOCHS", 2)
    monkeypatch.setattr(variations, "MAX_EPOCHS", 3)
    runs, results = tmp_path / "runs", tmp_path / "results"
    quiet = dict(dev_sentences=4, progress=False, log=lambda msg: None)
    protocol = choose_budget(runs, results, root, **quiet)
    assert [p["lr_factor"] for p in protocol["pilot"]] == [0.5, 1.0]
    assert all(len(p["dev_curve"]) == 1 for p in protocol["pilot"])
    best = max(protocol["pilot"], key=lambda p: p["dev_curve"][0]["dev_bleu"])
    assert protocol["chosen"]["lr_factor"] == best["lr_factor"]
    assert protocol["chosen"]["by"] == "highest dev BLEU after 1 epochs"
    assert all(0 <= p["encoder_similarity"] <= 1 for pilot in protocol["pilot"] for p in pilot["dev_curve"])
    long = protocol["base_long"]["dev_curve"]
    assert 2 <= len(long) <= 3 and protocol["budget_epochs"] == len(long)
    assert long[0] == best["dev_curve"][0]          # the pilot's run, continued
    assert [p["step"] for p in long] == [protocol["steps_per_epoch"] * (i + 1) for i in range(len(long))]
    assert json.loads((results / "protocol.json").read_text()) == protocol and "commit" in protocol
    # each rate's record, and the choice by the rule written before the pilot ran
    kept = {p.name: json.loads(p.read_text()) for p in (results / "pilot").iterdir()}
    assert [{k: kept[f"lr{p['lr_factor']}.json"][k] for k in p} for p in protocol["pilot"]] == protocol["pilot"]
    assert kept["results.json"]["chosen"] == {"setting": f"lr{best['lr_factor']}"}
    assert kept["results.json"]["rule"] == variations.PILOT_RULE
    # read back, not decided again
    monkeypatch.setattr(rounds, "train", lambda *a, **k: pytest.fail("trained again"))
    assert choose_budget(runs, results, root, **quiet) == protocol
    # the base row's first seed is the protocol's run, cut at the budget
    base = run_row_epochs("base", 1, protocol, runs, results, root, command="test", **quiet)
    assert base["dev_curve"] == [{k: p[k] for k in ("epoch", "dev_ppl", "dev_bleu", "encoder_similarity")}
                                 for p in long]
    assert base["epochs"] == long[-1]["epoch"] and base["command"] == "test"
    monkeypatch.undo()
    monkeypatch.setattr(variations, "LONG", LONG.replace(train_pairs=300, vocab_size=400, max_len=40,
                                                         max_tokens=1000, tokens_per_step=1000, warmup_steps=4,
                                                         amp=False))
    c1 = run_row_epochs("C1", 1, {**protocol, "budget_epochs": 2}, runs, results, root, **quiet)
    assert len(c1["dev_curve"]) == 2 and c1["config"]["N"] == 2 and c1["config"]["d_model"] == 64
    assert c1["steps"] == 2 * protocol["steps_per_epoch"] and c1["dev_ppl"] == c1["dev_curve"][-1]["dev_ppl"]
    assert load_records(results).keys() == {("base", 1), ("C1", 1)}
    # a row trained here names the machine it trained on; the protocol's own run is read, not trained
    assert [(m["device"], m["starts"]) for m in c1["trained_on"]] == [("cpu", 2)] and "trained_on" not in base
    # a row trained here keeps its last epoch's dev translations, and they re-score to its BLEU
    hyps = (results / "C1-seed1.dev.txt").read_text(encoding="utf-8").splitlines()
    refs = [t for _, t in load_split("multi30k", "dev", root)[:len(hyps)]]
    assert len(hyps) == 4 and round(sacre_bleu(hyps, refs)[0], 2) == c1["dev_bleu"]


def test_a_signal_during_the_dev_evaluation_stops_the_sweep_and_loses_no_epoch(tmp_path, monkeypatch):
    """A command started with `&` from a script inherits SIGINT ignored; the sweep must still stop on it
    while it scores the dev set (outside the training loop), and resume with every trained epoch kept."""
    import os
    import signal
    root = need_corpus("multi30k", "train", "dev")
    small = row_profile("C1", 1, LONG.replace(train_pairs=300, vocab_size=400, max_len=40, max_tokens=1000,
                                              tokens_per_step=1000, warmup_steps=4, amp=False), LONG_SCALE)
    run, quiet = tmp_path / "run", dict(dev_sentences=3, progress=False, log=lambda msg: None)
    steps = variations.data_size(small, run, root)[0]
    scored = []
    real_translate = table3.translate

    def translate_then_signal(*args, **kwargs):
        scored.append(1)
        if len(scored) == 2:                  # the second epoch's evaluation
            os.kill(os.getpid(), signal.SIGINT)
        return real_translate(*args, **kwargs)

    monkeypatch.setattr(table3, "translate", translate_then_signal)
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with pytest.raises(KeyboardInterrupt):
            variations.train_epochs(small, run, 2, steps, root, **quiet)
        assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN     # the caller's handler is back
    finally:
        signal.signal(signal.SIGINT, previous)
    assert len(json.loads((run / "dev_curve.json").read_text())) == 1
    assert checkpoint_paths(run)[-1] == checkpoint_file(run, 2 * steps)       # trained and saved, not scored
    trained = []
    real_train = rounds.train
    monkeypatch.setattr(rounds, "train", lambda p, *a, **k: trained.append(p.max_steps) or real_train(p, *a, **k))
    curve = variations.train_epochs(small, run, 2, steps, root, **quiet)
    assert [p["step"] for p in curve] == [steps, 2 * steps]
    # the second epoch is not trained again: its call finds the checkpoint at its last step
    log = (run / "train_log.csv").read_text().splitlines()
    assert len(log) == 1 + 2 * steps and trained == [2 * steps]


def test_the_command_turns_an_interrupt_outside_training_into_a_resume_message(tmp_path, monkeypatch, capsys):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt
    monkeypatch.setattr(variations, "choose_budget", interrupted)
    monkeypatch.setattr(variations, "keep_freed_memory", lambda: None)
    with pytest.raises(SystemExit) as stop:
        main(["--results", str(tmp_path / "results"), "--runs", str(tmp_path / "runs")])
    # exit 130, as Ctrl-C ends every other command, with the message on standard error
    assert stop.value.code == 130
    assert "run the same command again to resume" in capsys.readouterr().err


def test_two_processes_share_the_sweep_each_taking_a_run_the_other_does_not_hold(tmp_path, monkeypatch, capsys):
    from transformer.variations import converged_sweep, take_run
    runs, results = tmp_path / "runs", tmp_path / "results"
    monkeypatch.setattr(variations, "choose_budget",
                        lambda *a, **k: {"budget_epochs": 1, "steps_per_epoch": 1, "chosen": {"lr_factor": 1}})
    trained = []

    def fake_run(row, seed, protocol, runs_dir, results_dir, *args, **kwargs):
        trained.append((row, seed))
        record = {"row": row, "seed": seed, "epochs": 1, "dev_ppl": 10, "dev_bleu": 20,
                  "paper": TABLE3[row], "train_minutes": 1}
        record_path(results_dir, row, seed).parent.mkdir(parents=True, exist_ok=True)
        record_path(results_dir, row, seed).write_text(json.dumps(record))
        return record

    monkeypatch.setattr(variations, "run_row_epochs", fake_run)
    plan = [("base", 1), ("A1", 1), ("B1", 1)]
    with take_run(runs, "A1-seed1"):              # another process trains A1
        converged_sweep(plan, runs, results, None, "test")
    assert trained == [("base", 1), ("B1", 1)]
    assert "the 1 runs left are being trained by other processes" in capsys.readouterr().out
    converged_sweep(plan, runs, results, None, "test")     # A1 is free again
    assert trained[-1] == ("A1", 1) and "every run has its record" in capsys.readouterr().out
    # a second process cannot start deciding the protocol while one is deciding it
    monkeypatch.undo()
    monkeypatch.setattr(variations, "keep_freed_memory", lambda: None)
    with take_run(tmp_path / "runs2", "protocol"):
        with pytest.raises(SystemExit) as stop:
            main(["--runs", str(tmp_path / "runs2"), "--results", str(tmp_path / "results2")])
    assert "deciding the protocol" in str(stop.value.code)
    assert not (tmp_path / "results2").exists()


def test_the_pilot_chooses_the_rate_by_bleu_where_perplexity_would_choose_another(tmp_path, monkeypatch):
    results = tmp_path / "results"
    results.mkdir()

    def point(epoch, ppl, bleu):
        return {"epoch": epoch, "step": 10 * epoch, "dev_ppl": ppl, "dev_bleu": bleu, "encoder_similarity": 0.5,
                "train_minutes": epoch, "eval_minutes": 0.1}

    pilots = [{"lr_factor": lr, "run": f"table3-epochs-base-seed1-lr{lr}", "dev_curve": [point(1, ppl, bleu)]}
              for lr, ppl, bleu in ((0.25, 50, 9.0), (0.5, 40, 6.0))]       # perplexity picks 0.5, BLEU 0.25
    (results / "pilot").mkdir()
    for p in pilots:            # the rates' records, as a pilot stopped before its choice left them
        (results / "pilot" / f"lr{p['lr_factor']}.json").write_text(json.dumps(p))
    monkeypatch.setattr(variations, "RATE_PILOT", replace(variations.RATE_PILOT, settings=tuple(
        s for s in variations.RATE_PILOT.settings if s.changes["lr_factor"] in (0.25, 0.5))))
    monkeypatch.setattr(variations, "PILOT_EPOCHS", 1)
    monkeypatch.setattr(variations, "data_size", lambda *a, **k: (10, 400))
    continued = []

    def train_epochs(profile, run, epochs, *args, **kwargs):
        continued.append((profile.lr_factor, run.name))
        return [point(1, 50, 9.0), point(2, 30, 15.0)]

    monkeypatch.setattr(variations, "train_epochs", train_epochs)
    protocol = choose_budget(tmp_path / "runs", results, None, progress=False, log=lambda m: None)
    assert protocol["chosen"]["lr_factor"] == 0.25 and continued == [(0.25, "table3-epochs-base-seed1-lr0.25")]
    assert protocol["budget_epochs"] == 2 and protocol["pilot"] == pilots


def test_a_run_whose_curve_an_earlier_sweep_wrote_is_refused_before_training(tmp_path, monkeypatch):
    run = tmp_path / "run"
    run.mkdir()
    (run / "dev_curve.json").write_text(json.dumps([{"epoch": 1, "step": 10, "dev_ppl": 50, "dev_bleu": 5}]))
    monkeypatch.setattr(rounds, "train", lambda *a, **k: pytest.fail("trained"))
    with pytest.raises(ValueError, match="earlier version .* lack some of .*encoder_similarity"):
        variations.train_epochs(LONG, run, 3, 10, progress=False, log=lambda m: None)


def test_a_verdict_that_rests_on_a_collapsed_run_says_so():
    """A row whose encoder never went below COLLAPSED compares a model that does not read its input."""
    from transformer.table3 import claims_by_verdict

    def rec(row, seed, bleu, similarities):
        curve = [{"epoch": e, "encoder_similarity": s} for e, s in enumerate(similarities, start=1)]
        return (row, seed), {"row": row, "seed": seed, "dev_bleu": bleu, "dev_ppl": 5.0, "dev_curve": curve}
    records = dict([rec("base", 1, 25.0, [0.95, 0.5]), rec("base", 2, 25.5, [0.3]),
                    rec("big", 1, 12.0, [0.99, 0.98]), rec("C3", 1, 10.0, [0.99, 0.5, 0.95]),
                    rec("C1", 1, 24.0, [0.4]), rec("B1", 1, 11.0, [0.99, 0.99])])
    notes = {claim: n for group in claims_by_verdict(records).values() for claim, n in group}
    assert notes["the big model beats the base model"] == [
        "rests on a collapsed run: big, seed 1, which never left the collapse"]
    # a row with two reasons gets one note that names both
    [b1] = notes["smaller keys hurt (d_k 16 against 64)"]
    assert b1.startswith("rests on a collapsed run: B1, seed 1, which never left the collapse and whose keys have")
    # C3 left the collapse once, even if it went back above the threshold later
    assert not any("collapse" in n for n in notes["deeper is better (N 8 against 2)"])


def test_the_ledger_row_of_the_converged_sweep_marks_verdicts_that_wait_for_a_second_seed():
    from transformer.conclusion import converged_table3

    protocol = {"budget_epochs": 60, "scale": 8, "chosen": {"lr_factor": 0.25},
                "hardware": {"cpu": "x"}, "command": "python -m transformer.variations"}
    # every run's encoder left the collapse at epoch 1, unless the test says otherwise
    out = [{"epoch": 1, "encoder_similarity": 0.5}]
    records = {("base", s): {"dev_bleu": b, "dev_ppl": p, "dev_curve": out}
               for s, b, p in ((1, 20, 10), (2, 21, 11), (3, 22, 12))}
    row = converged_table3(protocol, records)
    assert row["result"].endswith("(in progress): 1 of 20 rows")
    assert row["ours"] == "base seeds within 2.00 perplexity and 2.00 BLEU; no claim has all its rows measured yet"
    records["A1", 1] = {"dev_bleu": 15, "dev_ppl": 20, "dev_curve": out}  # far below base: no second seed
    records["A4", 1] = {"dev_bleu": 21.5, "dev_ppl": 30, "dev_curve": out}  # within the base range by BLEU
    row = converged_table3(protocol, records)
    assert "2 claims measured, by dev BLEU: reproduced 1, within noise 1" in row["ours"]
    # A4's keys are the ones the scale-down shrinks most: 6.2 qualifies that verdict
    assert row["ours"].endswith("(1 provisional: a second seed to come); 6.2 qualifies 0 that rest "
                                "on a run whose encoder collapsed and 1 that rest on its smallest keys")
    records["A4", 2] = {"dev_bleu": 21.0, "dev_ppl": 29, "dev_curve": out}
    assert "provisional" not in converged_table3(protocol, records)["ours"]
    # a run that never left the collapse is counted
    records["A1", 1]["dev_curve"] = [{"epoch": 1, "encoder_similarity": 0.99}]
    assert "qualifies 1 that rest on a run whose encoder collapsed" in converged_table3(protocol, records)["ours"]
    assert converged_table3(protocol, {})["ours"] == "no record yet"


def test_a_row_diagnosed_at_another_rate_trains_apart_from_the_sweep(tmp_path, monkeypatch, capsys):
    protocol = {"budget_epochs": 2, "steps_per_epoch": 5, "vocab": 50, "chosen": {"lr_factor": 0.25}}
    monkeypatch.setattr(variations, "choose_budget", lambda *a, **k: protocol)
    trained = []

    def fake_epochs(profile, run, epochs, epoch_steps, *args, **kwargs):
        trained.append((profile.name, profile.lr_factor, Path(run).name, epochs))
        return [{"epoch": e, "step": e * epoch_steps, "dev_ppl": 9.0, "dev_bleu": 1.0,
                 "encoder_similarity": 0.5, "train_minutes": 0.1, "eval_minutes": 0.1}
                for e in range(1, epochs + 1)]

    monkeypatch.setattr(variations, "train_epochs", fake_epochs)
    monkeypatch.setattr(variations, "write_dev_translations", lambda *a, **k: None)   # nothing trained
    monkeypatch.setattr(variations, "machines_of", lambda run: [])                     # nor anywhere
    runs, results = tmp_path / "runs", tmp_path / "results"
    lr = Setting.parse(["lr_factor=0.125"])
    assert variations.records_dir(results, protocol, Setting.parse(["lr_factor=0.25"])) == results   # the protocol's
    assert variations.records_dir(results, protocol, lr) == results / "lr0.125"
    variations.converged_sweep([("C3", 1)], runs, results, None, "test", lr)
    name = row_profile("C3", 1, LONG, LONG_SCALE).name
    assert trained == [(f"{name}-lr0.125", 0.125, f"{name}-lr0.125", 2)]
    record = json.loads((results / "lr0.125" / "C3-seed1.json").read_text())
    assert record["profile"]["lr_factor"] == 0.125 and record["profile"]["name"].endswith("-lr0.125")
    assert load_records(results) == {}          # no verdict of the sweep reads it
    assert (runs / "taken" / "C3-seed1-lr0.125").exists()
    assert "outside the protocol" in capsys.readouterr().out
    # the base row's first seed at another rate is trained, not read from the protocol's run
    variations.converged_sweep([("base", 1)], runs, results, None, "test", lr)
    assert trained[-1][1] == 0.125 and (results / "lr0.125" / "base-seed1.json").exists()


def test_a_row_diagnosed_at_another_dropout_trains_apart_from_the_sweep(tmp_path, monkeypatch):
    protocol = {"budget_epochs": 2, "steps_per_epoch": 5, "vocab": 50, "chosen": {"lr_factor": 0.25}}
    monkeypatch.setattr(variations, "choose_budget", lambda *a, **k: protocol)
    trained = []

    def fake_epochs(profile, run, epochs, epoch_steps, *args, **kwargs):
        trained.append((profile.name, profile.lr_factor, profile.model["P_drop"], Path(run).name))
        return [{"epoch": e, "step": e * epoch_steps, "dev_ppl": 9.0, "dev_bleu": 1.0,
                 "encoder_similarity": 0.5, "train_minutes": 0.1, "eval_minutes": 0.1}
                for e in range(1, epochs + 1)]

    monkeypatch.setattr(variations, "train_epochs", fake_epochs)
    monkeypatch.setattr(variations, "write_dev_translations", lambda *a, **k: None)   # nothing trained
    monkeypatch.setattr(variations, "machines_of", lambda run: [])                     # nor anywhere
    runs, results = tmp_path / "runs", tmp_path / "results"
    drop = Setting.parse(["model.P_drop=0.1"])
    assert variations.records_dir(results, protocol, drop) == results / "pdrop0.1"
    # the same changes name the same folder, in whatever order they are given
    both = Setting.parse(["model.P_drop=0.1", "lr_factor=0.125"])
    assert variations.records_dir(results, protocol, both) == results / "lr0.125-pdrop0.1"
    variations.converged_sweep([("big", 1)], runs, results, None, "test", drop)
    name = row_profile("big", 1, LONG, LONG_SCALE).name
    # the protocol's rate, the row's widths, the dropout changed; the run named for it
    assert trained == [(f"{name}-pdrop0.1", 0.25, 0.1, f"{name}-pdrop0.1")]
    record = json.loads((results / "pdrop0.1" / "big-seed1.json").read_text())
    assert record["config"]["P_drop"] == 0.1 and record["config"]["d_model"] == 1024 // LONG_SCALE
    assert load_records(results) == {}          # no verdict of the sweep reads it
    assert (runs / "taken" / "big-seed1-pdrop0.1").exists()
    # the same, for fewer epochs than big's budget (3x the base row's): apart again
    assert variations.records_dir(results, protocol, drop, 3) == results / "pdrop0.1-epochs3"
    variations.converged_sweep([("big", 1)], runs, results, None, "test", drop, 3)
    assert trained[-1] == (f"{name}-pdrop0.1-epochs3", 0.25, 0.1, f"{name}-pdrop0.1-epochs3")
    short = json.loads((results / "pdrop0.1-epochs3" / "big-seed1.json").read_text())
    assert short["epochs"] == 3 and len(short["dev_curve"]) == 3 and record["epochs"] == 6
    assert short["outside_protocol"] == {"model.P_drop": 0.1, "epochs": 3}
    assert record["outside_protocol"] == {"model.P_drop": 0.1}
    assert (runs / "taken" / "big-seed1-pdrop0.1-epochs3").exists()


@pytest.mark.parametrize("argv, message", [
    (["--set", "model.P_drop=0.0"], "name them"), (["B1", "--short", "--set", "lr_factor=0.1"], "name them"),
    (["--lr-factor", "0.1"], "--lr-factor"), (["big", "--short", "--p-drop", "0.1"], "--p-drop"),
    (["--epochs", "5"], "--epochs"), (["big", "--epochs", "0"], "--epochs"),
    (["C3", "--lr-factor", "0"], "lr_factor must be positive"), (["big", "--p-drop", "1"], r"P_drop must be in"),
    (["C3", "--set", "steps=5"], "unknown field 'steps'"), (["C3", "--set", "epochs=3"], "--epochs N"),
    (["C3", "--set", "model.P_drop"], "key=value"),
])
def test_a_diagnosis_names_rows_of_the_converged_sweep_and_changes_a_run_could_train_with(
        tmp_path, capsys, argv, message):
    """--set (with its aliases --lr-factor and --p-drop, and --epochs) is refused before anything starts:
    without named rows, with --short, or with a change that no run could train with."""
    with pytest.raises(SystemExit):
        main(argv + ["--results", str(tmp_path / "r"), "--runs", str(tmp_path / "runs")])
    assert message in capsys.readouterr().err
    assert not (tmp_path / "r").exists() and not (tmp_path / "runs").exists()


def test_the_old_flags_are_the_same_setting_as_set():
    """--lr-factor and --p-drop stay for one release, as aliases: the same setting, the same folders."""
    from transformer.variations import asked_setting, build_parser
    parser = build_parser()
    old = asked_setting(parser, parser.parse_args(["B1", "--p-drop", "0.0", "--lr-factor", "0.125", "--epochs", "60"]))
    new = asked_setting(parser, parser.parse_args(["B1", "--set", "lr_factor=0.125", "model.P_drop=0.0",
                                                   "--epochs", "60"]))
    assert old == new and new.name == "lr0.125-pdrop0.0"
    # the epochs are the recipe's argument, not a change to the profile; they name the folder too
    protocol = {"chosen": {"lr_factor": 0.25}}
    assert variations.diagnosis(protocol, new, 60).name == "lr0.125-pdrop0.0-epochs60"
    assert variations.diagnosis(protocol, new, 60).changes == new.changes


def test_a_run_leaves_the_collapse_at_the_first_epoch_below_the_threshold():
    curve = [{"epoch": e, "encoder_similarity": s}
             for e, s in enumerate([0.99, COLLAPSED, 0.85, 0.93], start=1)]
    assert table3.left_collapse(curve) == 3          # the threshold itself is collapsed
    assert table3.left_collapse(curve[:2]) is None
    assert table3.left_collapse(curve, below=0.995) == 1


def test_a_row_s_last_dev_translations_are_the_ones_its_last_round_scored(tmp_path, monkeypatch):
    """One translation of the dev set per round, none after: the scorer writes what it scores beside the
    record, and the run's last round leaves its own there (no second model load to translate again)."""
    from transformer import table3
    calls = []
    monkeypatch.setattr(table3, "table3_translations",
                        lambda model, vocab, pairs: calls.append(model) or [f"{model} {s}" for s, _ in pairs])
    monkeypatch.setattr(table3, "sacre_bleu", lambda hyps, refs: (1.0, "sig"))
    keep = tmp_path / "out" / "C3-seed1.dev.txt"
    score = table3.table3_dev_bleu([("a", "A"), ("b", "B")], keep)
    for epoch in ("epoch1", "epoch2"):
        assert score(epoch, None) == {"dev_bleu": 1.0, "dev_bleu_signature": "sig"}
    assert keep.read_text().splitlines() == ["epoch2 a", "epoch2 b"] and calls == ["epoch1", "epoch2"]
