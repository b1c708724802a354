"""scripts/multi30k_cpu.py, run end to end with the tiny profile: decoding is chosen on dev, never on test."""
import json
import runpy
import sys
from pathlib import Path

import torch

import transformer.run
import transformer.corpora
import transformer.evaluate
import transformer.runlog
from transformer.decode import length_penalty
from tests.conftest import need_corpus

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "multi30k_cpu.py"


def test_script_chooses_on_dev_then_scores_test_once(tmp_path, monkeypatch):
    need_corpus("multi30k", "train", "dev", "test")
    reads = []
    real = transformer.corpora.load_split

    def recording_load_split(corpus, split, *args, **kwargs):
        reads.append(split)
        return real(corpus, split, *args, **kwargs)

    monkeypatch.setattr(transformer.corpora, "load_split", recording_load_split)
    monkeypatch.setattr(transformer.evaluate, "load_split", recording_load_split)
    out = tmp_path / "results"
    monkeypatch.setattr(sys, "argv", ["multi30k_cpu.py", "--profile", "tiny", "--run", str(tmp_path / "run"),
                                      "--results", str(out), "--max-sentences", "6"])
    runpy.run_path(str(SCRIPT), run_name="__main__")

    res = json.loads((out / "results.json").read_text())
    grid = res["dev_grid"]["rows"]
    # tiny keeps 3 checkpoints, so only "average 1" of (1, 5, 10) is possible; every alpha is tried
    assert [(r["average_last"], r["alpha"]) for r in grid] == [(1, 0.0), (1, 0.6), (1, 1.0), (1, 1.5), (1, 2.0), (1, 2.5)]
    best = max(r["sacrebleu_lowercase"] for r in grid)
    first_best = next(r for r in grid if r["sacrebleu_lowercase"] == best)
    assert res["chosen_on_dev"] == {"average_last": first_best["average_last"], "alpha": first_best["alpha"],
                                    "beam_size": 5}
    # the test split is read only after every dev translation, and then with the chosen setting
    assert "test" in reads and "test" not in reads[:reads.index("test")] and \
        set(reads[:reads.index("test")]) <= {"train", "dev"} and "dev" in reads[:reads.index("test")]
    test = res["test"]
    assert (test["beam_size"], test["alpha"], len(test["checkpoints"])) == \
        (5, first_best["alpha"], first_best["average_last"])
    # lowercasing can only merge n-gram types, so it never lowers BLEU
    for row in grid + [test, res["test_greedy"], res["test_paper_decoding"], res["test_last_checkpoint"]]:
        assert row["sacrebleu_lowercase"] >= row["sacrebleu"]
    assert "case:lc" in test["sacrebleu_lowercase_signature"] and "case:mixed" in test["sacrebleu_signature"]
    assert len((out / "translations.de").read_text(encoding="utf-8").splitlines()) == test["sentences"] == 6
    assert res["training"]["steps"] == 30 and res["command"].endswith("--max-sentences 6")
    for name in ("train_log.csv", "dev_log.csv", "profile.json", "run_info.json"):
        assert (out / name).is_file()
    # trained in rounds of the dev interval, each round's encoder checked
    curve = json.loads((out / transformer.run.CURVE).read_text())
    assert [p["step"] for p in curve] == [10, 20, 30]
    assert all(0 < p["encoder_similarity"] <= 1 for p in curve)
    # the shipped model: the chosen average in float16, loadable alone, scored as shipped
    shipped = res["shipped_model"]
    model, vocab, names = transformer.run.load_model(out / "model.pt")
    assert names == ["model.pt"] and shipped["average_last"] == first_best["average_last"]
    assert shipped["bytes"] == (out / "model.pt").stat().st_size and shipped["dtype"] == "float16"
    assert 0 <= shipped["same_translation_as_float32"] <= 6 and shipped["sacrebleu_lowercase"] >= 0
    assert res["hardware"]["cpu_kernels"] == torch.backends.cpu.get_cpu_capability()

    # run again at another commit: training is done, so that commit only evaluated
    monkeypatch.setattr(transformer.runlog, "git_commit", lambda: "f" * 40)
    # a new process there would start from that commit
    monkeypatch.setattr(transformer.runlog, "CODE_AT_START", transformer.runlog.code_state())
    runpy.run_path(str(SCRIPT), run_name="__main__")
    again = json.loads((out / "results.json").read_text())
    info = json.loads((out / "run_info.json").read_text())
    # every earlier start (one per round, and the call that found training done) is the first commit's
    assert [r["commit"] for r in info][-1] == "f" * 40
    assert {r["commit"] for r in info[:-1]} == {info[0]["commit"]} and len(info) == 5
    assert again["commit_training"] == sorted({info[0]["commit"]} - {None})
    assert again["commit"] == "f" * 40

    # the worked example: its winner is the best finished hypothesis under its alpha, and not under
    # alpha 0 exactly when the record says the length penalty changed the winner
    ex = json.loads((out / "worked_example.json").read_text(encoding="utf-8"))
    score = lambda h, a: h["logprob"] / length_penalty(h["length"], a)
    best = max(ex["finished"], key=lambda h: score(h, ex["alpha"]))
    plain = max(ex["finished"], key=lambda h: score(h, 0.0))
    assert best["text"] == ex["winner"] and plain["text"] == ex["winner_alpha_0"]
    assert ex["winner_changes"] == (best is not plain) and best["pieces"] == ex["output_pieces"]
    ended = [h["pieces"] for step in ex["steps"] for h in step["ended"]]
    assert ended == [h["pieces"] for h in ex["finished"]] and ended and all(p[-1] == "</s>" for p in ended)
    assert all(len(step["beams"]) <= ex["beam_size"] for step in ex["steps"])
    cross, enc = torch.tensor(ex["attention"]["cross"]), torch.tensor(ex["attention"]["encoder"])
    S, T = len(ex["source_pieces"]), len(ex["output_pieces"])
    assert cross.shape == (2, 4, T, S) and enc.shape == (2, 4, S, S)   # tiny: 2 layers, 4 heads
    assert torch.allclose(cross.sum(-1), torch.ones(2, 4, T), atol=0.01)
