"""Training in rounds (transformer.rounds): the stop rules, the kept model, the encoder's similarity in every
round, a curve of another purpose refused, and a second call that resumes instead of training again."""
import json
from pathlib import Path

import pytest

from tests.conftest import need_corpus
from transformer.evaluate import COLLAPSED
from transformer.profiles import get_profile
from transformer import rounds as rounds_module
from transformer.rounds import budget, dev_decides, patience, train_in_rounds
from transformer.run import load_model

ROOT = Path(__file__).resolve().parents[1]


def test_rounds_stop_by_patience_after_the_minimum_and_keep_the_best(tmp_path, monkeypatch):
    need_corpus("multi30k", "train", "dev")
    # ten steps in, the tiny model's encoder has not left its collapse, during which patience waits
    # (the next test); here patience alone is tested
    monkeypatch.setattr(rounds_module, "COLLAPSED", 1.01)
    profile = get_profile("tiny", keep_last=2, patience=2, min_rounds=5)
    scores = iter([1.0, 3.0, 2.0, 2.5, 2.9, 2.0, 9.0])
    seen = []

    def score(model, vocab):
        seen.append(model.num_parameters())
        return {"dev_x": next(scores)}

    run, select = tmp_path / "run", tmp_path / "select"
    rounds = train_in_rounds(profile, run, 2, score, dev_decides(profile, "dev_x"), key="dev_x",
                             best_path=select / "best.pt", curve_path=select / "curve.json",
                             sentences=["A dog runs.", "Two men sit on a bench."], log=lambda msg: None)
    curve, best, why = rounds.curve, rounds.best, rounds.stopped
    # round 2 is best; rounds 3 and 4 do not beat it, but patience waits for the fifth round
    assert [p["dev_x"] for p in curve] == [1.0, 3.0, 2.0, 2.5, 2.9]
    assert best["round"] == 2 and "not better for 2 rounds" in why
    assert [p["step"] for p in curve] == [2, 4, 6, 8, 10] and [p["round"] for p in curve] == [1, 2, 3, 4, 5]
    # every round says whether its encoder tells positions apart, and what the trainer logged on dev
    assert all(0 <= p["encoder_similarity"] <= 1 and p["dev_ppl"] > 1 for p in curve)
    assert json.loads((select / "curve.json").read_text()) == curve
    # best.pt is round 2's model, not the last one
    kept, _, _ = load_model(select / "best.pt")
    last, _, _ = load_model(run, 1)
    assert any((a != b).any() for a, b in zip(kept.state_dict().values(), last.state_dict().values()))
    # a second call trains nothing and scores nothing: the curve already says stop
    again = train_in_rounds(profile, run, 2, score, dev_decides(profile, "dev_x"), key="dev_x",
                            best_path=select / "best.pt", curve_path=select / "curve.json",
                            sentences=["A dog runs."], log=lambda msg: None)
    assert again == rounds and len(seen) == 5


def test_stop_rules_read_the_rounds_so_far():
    curve = [{"x": x, "train_minutes": m} for x, m in ((1, 1.0), (3, 2.0), (2, 3.0), (2.5, 4.0))]
    assert patience("x", 2)(curve) == "x not better for 2 rounds"
    assert patience("x", 2, min_rounds=5)(curve) is None and patience("x", 3)(curve) is None
    assert budget(rounds=4)(curve) == "4 rounds" and budget(rounds=5)(curve) is None
    assert budget(minutes=4)(curve) == "the 4-minute training budget" and budget(minutes=5)(curve) is None
    assert all(rule([]) is None for rule in (patience("x", 1), budget(rounds=1), budget(minutes=1)))


def test_patience_can_read_a_smoothed_score():
    """With a window, a round counts as better only if the mean of the latest rounds is: one lucky round
    does not reset the count, a steady rise does."""
    curve = [{"x": x} for x in (1, 6, 1, 3, 4, 5)]
    assert patience("x", 4)(curve) == "x not better for 4 rounds"           # the lucky round 2 is the best
    assert patience("x", 4, window=3)(curve) is None            # means 1, 3.5, 2.7, 3.3, 2.7, 4: the last
    curve += [{"x": 1}, {"x": 1}]                                # means 3.3, 2.3: two rounds below 4
    assert patience("x", 2, window=3)(curve) == "x not better for 2 rounds"
    assert patience("x", 1, window=2)([{"x": 1}]) is None


def test_patience_waits_while_the_encoder_is_collapsed():
    """A dev score that stopped improving says nothing while the encoder does not read its input:
    the run goes on until the last round's similarity is below COLLAPSED, then patience counts as
    before (from the best round, which may be a collapsed one)."""
    curve = [{"x": x, "encoder_similarity": s} for x, s in ((1, 0.99), (3, 0.98), (2, 0.97), (2.5, COLLAPSED))]
    assert patience("x", 2)(curve) is None
    curve[-1]["encoder_similarity"] = COLLAPSED - 0.01
    assert patience("x", 2)(curve) == "x not better for 2 rounds"


def test_a_curve_written_for_another_purpose_is_refused(tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "dev_curve.json").write_text(json.dumps([{"step": 2, "dev_x": 1.0}]))
    with pytest.raises(ValueError, match="lack some of dev_bleu"):
        train_in_rounds(get_profile("tiny"), tmp_path / "run", 2, lambda m, v: {}, [budget(rounds=1)],
                        needs=("dev_bleu",), sentences=["a"])


def test_a_run_trained_past_its_curve_is_refused_before_it_is_scored(tmp_path):
    """A folder trained without rounds (or whose curve was lost) holds checkpoints past round 1: measuring them
    as round 1 would mislabel every point, so the trainer says so instead."""
    need_corpus("multi30k", "train", "dev")
    from transformer.train import train
    profile = get_profile("tiny", max_steps=4)
    train(profile, tmp_path / "run", progress=False, log=lambda msg: None)
    scored = []
    with pytest.raises(ValueError, match="trained to step 4, past round 1's step 2"):
        train_in_rounds(profile, tmp_path / "run", 2, lambda m, v: scored.append(1) or {}, [budget(rounds=3)],
                        sentences=["A dog runs."], log=lambda msg: None)
    assert scored == [] and not (tmp_path / "run" / "dev_curve.json").exists()


def test_a_setting_is_named_for_its_changes_and_applies_them_checked():
    from transformer.profiles import PROFILES
    from transformer.profiles import Setting
    setting = Setting.parse(["model.P_drop=0.0", "lr_factor=0.125"])
    assert setting.name == "lr0.125-pdrop0.0" and setting == Setting.parse(["lr_factor=0.125", "model.P_drop=0.0"])
    profile = setting.apply(PROFILES["table3-epochs"])
    assert profile.lr_factor == 0.125 and profile.model["P_drop"] == 0.0 and profile.name == "table3-epochs"
    assert setting.without("lr_factor").name == "pdrop0.0" and Setting.of({}).name == ""
    assert Setting.of({"model.norm_first": True}, "prenorm").name == "prenorm"
    with pytest.raises(ValueError, match="unknown field 'steps'"):
        Setting.parse(["steps=3"]).apply(PROFILES["table3-epochs"])


def test_a_pilot_tries_each_setting_once_and_its_rule_never_sees_a_variant(tmp_path):
    """Settings tried by separate commands, each record kept; the choice once every setting the rule reads
    has one; a variant tried and recorded but never waited for and never shown to the rule."""
    from transformer.profiles import Setting
    from transformer.rounds import chosen_setting, pilot
    settings = [Setting.of({"lr_factor": 0.1}), Setting.of({"lr_factor": 0.2}),
                Setting.of({"lr_factor": 0.2, "model.norm_first": True}, "pre")]
    tried, shown = [], []

    def trial(setting):
        tried.append(setting.name)
        return {"score": setting.changes["lr_factor"] * (10 if setting.name == "pre" else 1)}

    def choose(records):
        shown.append(sorted(records))
        return {"setting": max(records, key=lambda name: records[name]["score"])}

    assert pilot(settings, trial, choose, "the highest score", tmp_path, ["lr0.1"], ["pre"]) is None
    assert tried == ["lr0.1"] and not (tmp_path / "results.json").exists()      # lr0.2 is still to come
    with pytest.raises(ValueError, match="has not chosen yet"):
        chosen_setting(tmp_path, settings)
    assert pilot(settings, trial, choose, "the highest score", tmp_path, variants=["pre"]) == {"setting": "lr0.2"}
    assert tried == ["lr0.1", "lr0.2", "pre"] and shown == [["lr0.1", "lr0.2"]]
    kept = json.loads((tmp_path / "results.json").read_text())
    assert kept["rule"] == "the highest score" and kept["settings"] == ["lr0.1", "lr0.2", "pre"]
    assert json.loads((tmp_path / "lr0.1.json").read_text())["changes"] == {"lr_factor": 0.1}
    assert chosen_setting(tmp_path, settings) == settings[1]


def test_every_recorded_pilot_is_a_pilot_value_whose_rule_replays_its_choice():
    """The parser's four pilots are values of the package: each committed record holds the rule in the
    same words, and the rule applied to the committed records of its settings makes the recorded choice
    (the attention pilot with its start, the vocabulary pilot's choice, as the rate 0)."""
    import json

    from transformer import parser_training as pt
    results = ROOT / "results" / "parsing-pilot"
    for pilot in pt.PILOTS:
        folder = pilot.folder(results)
        kept = json.loads((folder / "results.json").read_text())
        assert kept["rule"] == pilot.rule and set(kept["settings"]) <= set(pilot.names)
        records = {n: json.loads((folder / f"{n}.json").read_text()) for n in kept["settings"]
                   if n not in pilot.variants}
        start = pilot.start(results)
        if start:
            records = {start[0].name: start[1], **records}
        assert pilot.choose(records) == kept["chosen"], pilot.name
        assert pilot.chosen(results).name == kept["chosen"]["setting"]


def test_a_pilot_that_starts_from_another_adds_its_changes_and_is_refused_before_that_choice(tmp_path):
    """Pilot.run with `after`: nothing trains before the first pilot has chosen; then the settings carry the
    chosen changes, the chosen run's record is compared as the choice to change nothing, and a chosen
    setting's run is copied into a new run once (continue_into)."""
    from transformer.profiles import Setting
    from transformer.rounds import Pilot
    first = Pilot("", (Setting.of({"lr_factor": 0.1}), Setting.of({"lr_factor": 0.2})), "the highest score",
                  lambda records: {"setting": max(records, key=lambda s: records[s]["score"])})
    then = Pilot("then", (Setting.of({"model.P_drop": 0.0}, "nodrop"),), "the highest score",
                 first.choose, after=first)
    base = tmp_path / "results" / "pilot"
    scores = {"lr0.1": 1.0, "lr0.2": 2.0, "nodrop": 1.5}
    trained = []

    def trial(setting):
        trained.append((setting.name, setting.changes))
        return {"score": scores[setting.name]}

    with pytest.raises(ValueError, match="not chosen yet"):
        then.run(trial, base)
    assert trained == []
    assert first.run(trial, base) == {"setting": "lr0.2"}
    assert then.run(trial, base) == {"setting": "lr0.2"}      # the start's own run wins
    assert trained[-1] == ("nodrop", {"lr_factor": 0.2, "model.P_drop": 0.0})
    assert then.folder(base) == tmp_path / "results" / "pilot-then"
    assert then.chosen(base) == Setting.of({"lr_factor": 0.2})
    runs = tmp_path / "runs" / "pilot"
    for name in ("lr0.2", "lr0.2-select"):
        (runs / name).mkdir(parents=True)
        (runs / name / "f").write_text(name)
    first.continue_into(tmp_path / "runs" / "final", runs, first.chosen(base))
    assert (tmp_path / "runs" / "final" / "f").read_text() == "lr0.2"
    assert (tmp_path / "runs" / "final-select" / "f").read_text() == "lr0.2-select"
    with pytest.raises(ValueError, match="has not trained lr0.1"):
        first.continue_into(tmp_path / "runs" / "other", runs, Setting.of({"lr_factor": 0.1}))
    # a run begun from the pilot resumes after the pilot's folders are gone
    import shutil
    shutil.rmtree(runs)
    first.continue_into(tmp_path / "runs" / "final", runs, first.chosen(base))
    assert (tmp_path / "runs" / "final" / "f").read_text() == "lr0.2"


def test_a_pilot_reads_the_choice_it_starts_from_once_a_call(tmp_path, monkeypatch):
    """run and chosen read the earlier pilot's choice (its records on disk) once each, not once for the
    settings and again for the comparison."""
    from transformer.profiles import Setting
    from transformer.rounds import Pilot
    first = Pilot("", (Setting.of({"lr_factor": 0.1}),), "the only one", lambda records: {"setting": "lr0.1"})
    then = Pilot("then", (Setting.of({"model.P_drop": 0.0}, "nodrop"),), "the only one",
                 lambda records: {"setting": "nodrop"}, after=first)
    base = tmp_path / "results" / "pilot"
    first.run(lambda setting: {"score": 1.0}, base)
    reads = []
    start = Pilot.start
    monkeypatch.setattr(Pilot, "start", lambda self, results: reads.append(self.name) or start(self, results))
    then.run(lambda setting: {"score": 1.0}, base)
    assert reads.count("then") == 1
    assert then.chosen(base).name == "nodrop" and reads.count("then") == 2


def test_the_scripts_define_no_pilot_of_their_own_and_import_no_script():
    """Pilots are values of the package; a script is a thin command around it (scripts/parsing.py at most
    350 lines, its longest function at most 60) and imports the package, never another script."""
    import ast
    scripts = sorted((ROOT / "scripts").glob("*.py"))
    names = {p.stem for p in scripts}
    for path in scripts:
        tree = ast.parse(path.read_text())
        imported = {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
        imported |= {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        assert not imported & names, f"{path.name} imports a script: {imported & names}"
        calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "Pilot"]
        assert not calls and not any(isinstance(n, ast.FunctionDef) and "pilot" in n.name and
                                     n.name not in ("run_pilot", "start_from_pilot", "pilot_setting")
                                     for n in tree.body), path.name
    parsing = ROOT / "scripts" / "parsing.py"
    tree = ast.parse(parsing.read_text())
    assert len(parsing.read_text().splitlines()) <= 350
    assert max(n.end_lineno - n.lineno + 1 for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)) <= 60


def test_the_minute_each_pilot_rule_was_committed_agrees_with_the_history():
    """results/rule-commits.json (read by 6.3 (continued), which a build without git needs) is what
    tools/rule_commits.py finds in git's history; a pilot whose rule it lacks cannot be set beside its runs."""
    import importlib.util
    import subprocess
    from transformer.parser_training import PILOTS
    record = json.loads((ROOT / "results" / "rule-commits.json").read_text())["rules"]
    assert sorted(record) == sorted([p.name for p in PILOTS] + ["curve", "curve verdict"])
    shallow = subprocess.run(["git", "rev-parse", "--is-shallow-repository"], cwd=ROOT, capture_output=True,
                             text=True)
    if shallow.returncode != 0 or shallow.stdout.strip() != "false":
        pytest.skip("no whole git history here (an unpacked source archive, or a shallow clone)")
    spec = importlib.util.spec_from_file_location("rule_commits", ROOT / "tools" / "rule_commits.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    assert tool.first_commits() == record
