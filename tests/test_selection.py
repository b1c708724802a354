"""Training until a dev score stops improving (transformer.selection): the stopping rule, the kept model,
and a second call that resumes instead of training again."""
import json

from tests.conftest import need_corpus
from transformer.run import load_model
from transformer.selection import train_until_dev_stops
from transformer.profiles import get_profile


def test_rounds_stop_by_patience_after_the_minimum_and_keep_the_best(tmp_path):
    need_corpus("multi30k", "train")
    profile = get_profile("tiny", save_every_steps=2, eval_every=2, keep_last=2)
    scores = iter([1.0, 3.0, 2.0, 2.5, 2.9, 2.0, 9.0])
    seen = []

    def score(model, vocab):
        seen.append(model.num_parameters())
        return {"dev_x": next(scores)}

    run, select = tmp_path / "run", tmp_path / "select"
    curve, best, why = train_until_dev_stops(profile, run, None, score, "dev_x", select, round_steps=2,
                                             patience=2, min_rounds=5, log=lambda msg: None)
    # round 2 is best; rounds 3 and 4 do not beat it, but patience waits for the fifth round
    assert [p["dev_x"] for p in curve] == [1.0, 3.0, 2.0, 2.5, 2.9]
    assert best["round"] == 2 and "not better for 2 rounds" in why
    assert [p["step"] for p in curve] == [2, 4, 6, 8, 10]
    assert json.loads((select / "dev_curve.json").read_text()) == curve
    # best.pt is round 2's model, not the last one
    kept, _, _ = load_model(select / "best.pt")
    last, _, _ = load_model(run, 1)
    assert any((a != b).any() for a, b in zip(kept.state_dict().values(), last.state_dict().values()))
    # a second call trains nothing and scores nothing: the curve already says stop
    again = train_until_dev_stops(profile, run, None, score, "dev_x", select, round_steps=2, patience=2,
                                  min_rounds=5, log=lambda msg: None)
    assert again == (curve, best, why) and len(seen) == 5
