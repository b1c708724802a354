"""Chapter 6.3: reading and cleaning trees, linearisation both ways, repair, evalb-style scores, the corpus."""
import random
from collections import Counter
from dataclasses import replace

import pytest
from nltk.tree import Tree

from tests.conftest import need_seed_folder
from transformer.corpora import load_split
from transformer.parsing import (MalformedTree, TreeConstraint, bracket_scores, brackets, clean_tree, delinearize,
                                 file_split, linearize, parse_output, prepare_ptb, read_treebank, repair)

T = Tree.fromstring


def test_cleaning_drops_empty_elements_and_function_tags():
    raw = T("(S (NP-SBJ-1 (-NONE- *)) (NP-TMP=2 (NN today)) (VP (VBD rose) (-LRB- -LRB-)) (. .))")
    assert clean_tree(raw) == T("(S (NP (NN today)) (VP (VBD rose) (-LRB- -LRB-)) (. .))")
    assert clean_tree(T("(S (-NONE- *T*))")) is None


def test_file_split_of_the_sample_and_of_a_full_treebank():
    assert [file_split(f"wsj_{n:04d}.mrg", False) for n in (1, 159, 160, 179, 180, 199)] == \
        ["train", "train", "dev", "dev", "test", "test"]
    assert [file_split(f"{s:02d}/wsj_{s:02d}07.mrg", True) for s in (0, 2, 21, 22, 23, 24)] == \
        [None, "train", "train", "dev", "test", None]


def test_linearisation_round_trips_and_names_what_is_malformed():
    tree = T("(S (NP (DT the) (NN cat)) (VP (VBD sat) (PP (IN on) (NP (DT a) (NN mat)))) (. .))")
    words, tokens = linearize(tree)
    assert words == ["the", "cat", "sat", "on", "a", "mat", "."]
    assert " ".join(tokens) == "(S (NP XX XX )NP (VP XX (PP XX (NP XX XX )NP )PP )VP XX )S"
    assert delinearize(tokens, words, tag="XX").leaves() == words
    assert delinearize(tokens, words) == T("(S (NP (XX the) (XX cat)) (VP (XX sat) (PP (XX on) (NP (XX a) "
                                           "(XX mat)))) (XX .))")
    for bad, message in ((["(S", "XX"], "never closed"), (["(S", "XX", ")NP"], "closes"),
                         (["(S", "XX", "XX", ")S"], "more XX"), (["(S", ")S"], "no words"),
                         (["(S", "YY", ")S"], "unknown token"), (["(S", ")S", ")S"], "no words")):
        with pytest.raises(MalformedTree, match=message):
            delinearize(bad, ["w"])


def test_repair_always_gives_a_tree_over_the_words():
    rng = random.Random(0)
    tree = T("(S (NP (DT the) (NN cat)) (VP (VBD sat) (PP (IN on) (NP (DT a) (NN mat)))) (. .))")
    words, tokens = linearize(tree)
    vocabulary = ["XX", "(S", ")S", "(NP", ")NP", "(VP", ")VP", "junk"]
    statuses = Counter()
    for _ in range(500):
        corrupt = list(tokens)
        for _ in range(rng.randint(1, 4)):     # delete, insert or replace tokens at random
            i = rng.randrange(len(corrupt) + 1)
            action = rng.choice(["del", "ins", "rep"])
            if action == "del" and i < len(corrupt):
                del corrupt[i]
            elif action == "ins":
                corrupt.insert(i, rng.choice(vocabulary))
            elif i < len(corrupt):
                corrupt[i] = rng.choice(vocabulary)
        out, status = parse_output(corrupt, words)
        statuses[status] += 1
        if out is not None:
            assert out.leaves() == words and status in ("well-formed", "repaired")
    assert statuses["repaired"] > 300
    assert repair(["XX", "XX"], 2) is None and parse_output(["junk"], ["w"]) == (None, "empty")


def test_brackets_follow_collins_prm():
    tree = T("(TOP (S (NP (PRP He)) (VP (VBD gave) (PRT (RP up)) (, ,) (NP (`` ``) (NN it) ('' ''))) (. .)))")
    # words that count: He 0, gave 1, up 2, it 3; PRT is scored as ADVP; TOP is not a bracket
    assert brackets(tree) == Counter({("S", 0, 4): 1, ("NP", 0, 1): 1, ("VP", 1, 4): 1, ("ADVP", 2, 3): 1,
                                      ("NP", 3, 4): 1})
    assert brackets(T("(S (NP (NN it)) (PRN (, ,)) (. .))")) == Counter({("S", 0, 1): 1, ("NP", 0, 1): 1})


def test_bracket_scores_by_hand_and_refusals():
    gold = T("(S (NP (DT The) (NN cat)) (VP (VBD sat) (PP (IN on) (NP (DT the) (NN mat)))) (. .))")
    pred = T("(S (NP (XX The) (XX cat)) (VP (XX sat) (PP (XX on)) (NP (XX the) (XX mat))) (XX .))")
    s = bracket_scores([gold, gold], [pred, gold])
    assert (s["matched"], s["gold_brackets"], s["test_brackets"]) == (9, 10, 10)
    assert s["precision"] == s["recall"] == pytest.approx(90.0) and s["f1"] == pytest.approx(90.0)
    assert s["exact_match"] == 50.0
    flat = T("(S (XX The) (XX cat) (XX sat) (XX on) (XX the) (XX mat) (XX .))")
    s = bracket_scores([gold], [flat])          # one bracket, correct: precision 100, recall 20
    assert (s["precision"], s["recall"]) == (100.0, 20.0) and s["f1"] == pytest.approx(2 * 100 * 20 / 120)
    with pytest.raises(ValueError, match="words differ"):
        bracket_scores([gold], [T("(S (XX A) (XX cat))")])
    with pytest.raises(ValueError, match="1 gold trees but 2"):
        bracket_scores([gold], [pred, pred])


def test_the_sample_reads_splits_and_prepares_the_corpus(tmp_path):
    need_seed_folder("ptb-sample", "wsj_0001.mrg", "wsj_0199.mrg")
    trees = read_treebank()
    assert {k: len(v) for k, v in trees.items()} == {"train": 3396, "dev": 273, "test": 245}
    counts = prepare_ptb(tmp_path)
    pairs = load_split("ptb", "test", tmp_path)
    assert counts["test"] == len(pairs) == 245
    words, tokens = linearize(trees["test"][0])
    assert pairs[0] == (" ".join(words), " ".join(tokens))


def test_bad_treebanks_are_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="no wsj_NNNN.mrg files"):
        read_treebank(tmp_path)
    (tmp_path / "wsj_0001.mrg").write_text("( (S (NP (NN a)) )\n")        # one bracket short
    with pytest.raises(ValueError, match="wsj_0001.mrg"):
        read_treebank(tmp_path)
    (tmp_path / "wsj_0001.mrg").write_text("( (S (NP (NN a)) ))\n")
    with pytest.raises(ValueError, match="the dev split .* is empty"):
        read_treebank(tmp_path)
    with pytest.raises(FileNotFoundError, match="prepare_ptb"):
        load_split("ptb", "train", tmp_path / "nothing")


# the baselines of "Where a parser stands"

TOY = [Tree.fromstring(s) for s in (
    "(S (NP (DT the) (NN cat)) (VP (VBD sat) (PP (IN on) (NP (DT the) (NN mat)))) (. .))",
    "(S (NP (DT a) (NN dog)) (VP (VBD ran)) (. .))",
    "(S (NP (DT the) (JJ big) (NN dog)) (VP (VBD saw) (NP (DT a) (NN cat))) (. .))",
)]


def test_the_floors_ignore_the_sentence():
    from transformer.parsing import flat_tree, right_branching_tree
    tagged = TOY[0].pos()
    flat, right = flat_tree(tagged), right_branching_tree(tagged)
    assert flat.leaves() == right.leaves() == TOY[0].leaves() and flat.height() == 3
    # right-branching: each word opens a bracket running to the end (the final period does not count)
    assert sorted(end - start for _, start, end in brackets(right)) == [1, 2, 3, 4, 5, 6]
    assert bracket_scores([TOY[0]], [flat])["matched"] == 1          # the root S alone


@pytest.mark.parametrize("horizontal,vertical", [(1, 1), (1, 2), (2, 2)])
def test_the_pcfg_parses_its_own_training_trees_back(horizontal, vertical):
    from transformer.parsing import PCFG, pcfg_parse
    grammar = PCFG(TOY, horizontal, vertical)
    for tree in TOY:
        parsed, found = pcfg_parse(grammar, tree.pos())
        assert found and parsed.leaves() == tree.leaves()
        assert bracket_scores([tree], [parsed])["f1"] == pytest.approx(100.0)


def test_the_pcfg_prefers_the_likelier_tree_and_falls_back_when_it_derives_none():
    from transformer.parsing import PCFG, pcfg_parse
    # the same tags under two labels, one seen twice as often
    likely, rare = "(S (NP (DT a) (NN dog)) (VP (VBD ran)))", "(S (ADJP (DT a) (NN dog)) (VP (VBD ran)))"
    grammar = PCFG([Tree.fromstring(s) for s in (likely, likely, rare)])
    parsed, found = pcfg_parse(grammar, Tree.fromstring(rare).pos())
    assert found and parsed == Tree.fromstring(likely)
    unknown = [("I", "PRP"), ("sang", "VBZ")]                      # a tag the grammar never saw
    parsed, found = pcfg_parse(grammar, unknown)
    assert not found and parsed.leaves() == ["I", "sang"] and parsed.height() == 3


def test_the_tagger_is_learned_from_the_trees_alone_and_repeatable():
    from transformer.parsing import train_tagger
    state = random.getstate()
    a, b = train_tagger(TOY * 5), train_tagger(TOY * 5)
    assert random.getstate() == state
    words = ["the", "big", "cat", "saw", "a", "dog", "."]
    assert a.tag(words) == b.tag(words) and [t for _, t in a.tag(words)][:3] == ["DT", "JJ", "NN"]


def parsing_script(tmp_path, files=(1, 2, 160, 180), name="parsing"):
    """scripts/NAME.py as a module, and a small treebank of the sample's `files` (train 0001-0159, dev
    0160-0179, test 0180-0199)."""
    import shutil
    need_seed_folder("ptb-sample", "wsj_0001.mrg", "wsj_0199.mrg")
    from transformer.corpora import data_dir
    small = tmp_path / "wsj"
    small.mkdir()
    for number in files:
        shutil.copy(data_dir() / "ptb-sample" / f"wsj_{number:04d}.mrg", small)
    return script_module(name), small


def script_module(name):
    """scripts/NAME.py as a module, imported from the scripts' folder as the command line runs it."""
    import importlib
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.pop(0)


def test_the_baselines_command_writes_its_record(tmp_path):
    import json
    parsing_baselines, small = parsing_script(tmp_path, (1, 2, 3, 4, 160, 180), "parsing_baselines")
    parsing_baselines.main(["--results", str(tmp_path / "out"), "--treebank", str(small)])
    record = json.loads((tmp_path / "out" / "baselines.json").read_text())
    assert set(record["test"]) == {"flat tree", "right-branching tree", "PCFG, gold tags", "PCFG, tagger's tags"}
    assert len(record["dev_grid"]) == 4 and record["chosen"]["by"].startswith("dev")
    assert {"date", "commit", "hardware", "command"} <= set(record)
    trees = (tmp_path / "out" / "pcfg.tagger.test.pred.mrg").read_text().splitlines()
    assert len(trees) == record["splits"]["test"] == record["test"]["flat tree"]["sentences"]


def test_the_parsing_command_trains_decodes_and_writes_its_record(tmp_path, monkeypatch, capsys):
    """scripts/parsing.py end to end, made small: a 1-layer model, rounds of 2 steps, beam 2; then
    killed state: a second call finds the rounds done and writes the same record."""
    import json

    script, small = parsing_script(tmp_path, (1, 2, 3, 4, 160, 180))
    tiny = dict(model={"N": 1, "d_model": 32, "d_ff": 64, "h": 2, "d_k": 16, "d_v": 16},
                save_every_steps=2, eval_every=2, keep_last=2, warmup_steps=2, round_steps=2, patience=1,
                min_rounds=1, max_rounds=3)
    monkeypatch.setattr(script, "PROFILE", script.PROFILE.replace(
        vocab_size=600, **tiny | {"model": tiny["model"] | {"share_embeddings": False}}))
    monkeypatch.setattr(script, "SHARED_PROFILE", script.SHARED_PROFILE.replace(
        vocab_size=600, **tiny | {"model": tiny["model"] | {"share_embeddings": True}}))
    for name, value in (("BEAM", 2), ("MAX_EXTRA", 10)):
        monkeypatch.setattr(script.pt, name, value)
    argv = ["--run", str(tmp_path / "runs" / "parsing"), "--results", str(tmp_path / "results"),
            "--treebank", str(small)]
    script.main(argv)
    record = json.loads((tmp_path / "results" / "results.json").read_text())
    curve = record["dev_curve"]
    assert 2 <= len(curve) <= 3 and [p["step"] for p in curve] == [2 * (i + 1) for i in range(len(curve))]
    assert record["chosen"]["dev_f1"] == max(p["dev_f1"] for p in curve)
    assert record["test"]["sentences"] == record["splits"]["test"]
    # constrained decoding: every output is a tree over its sentence
    assert record["test"]["status"] == {"well-formed": record["splits"]["test"]}
    assert record["test_greedy"]["status"] == {"well-formed": record["splits"]["test"]}
    assert set(record["dev_nll_sources"]) == {"own_sentence", "another_sentence"}
    trees = (tmp_path / "results" / "test.pred.mrg").read_text().splitlines()
    assert len(trees) == record["splits"]["test"]
    # the chosen round's dev F1, re-scored from the dev trees the record keeps
    from nltk import Tree
    from transformer.parsing import bracket_scores, read_treebank
    dev_trees = (tmp_path / "results" / "dev.pred.mrg").read_text().splitlines()
    gold = read_treebank(small)["dev"]
    rescored = bracket_scores(gold, [None if t == "()" else Tree.fromstring(t) for t in dev_trees])
    assert round(rescored["f1"], 3) == record["dev"]["f1"] == record["chosen"]["dev_f1"]
    assert (tmp_path / "runs" / "parsing-corpus" / "ptb" / "train.tree").exists()
    assert (tmp_path / "runs" / "parsing-select" / "best.pt").exists()
    # run again: nothing is trained twice, the same choice is made
    script.main(argv)
    again = json.loads((tmp_path / "results" / "results.json").read_text())
    assert again["dev_curve"] == curve and again["test"] == record["test"] | {"minutes": again["test"]["minutes"]}
    assert set(again["encoder"]) == {"source_pieces", "mean_cosine_of_source_embeddings",
                                     "encoder_output_spread_over_positions"}
    # the paper's one table for source, target and output: its own folders
    script.main(argv[4:] + ["--share-embeddings", "--run", str(tmp_path / "runs" / "parsing-tied"),
                            "--results", str(tmp_path / "results-tied")])
    tied = json.loads((tmp_path / "results-tied" / "results.json").read_text())
    assert tied["command"].endswith("--share-embeddings") and tied["model"]["share_embeddings"]
    assert not record["model"]["share_embeddings"]
    # a labelled variant: the decoder told which word it is on, its symbol resolved in its vocabulary
    script.main(argv + ["--set", "model.pointer_id=XX"])
    pointer = json.loads((tmp_path / "results-pointerXX" / "results.json").read_text())
    from transformer.data import Vocab
    vocab = Vocab.load(tmp_path / "runs" / "parsing-pointerXX" / "vocab.model")
    assert pointer["model"]["pointer_id"] == vocab.sp.piece_to_id("\u2581XX") != vocab.sp.unk_id()
    assert pointer["variant"] == "pointerXX" and pointer["changes"] == {"model.pointer_id": "XX"}
    assert pointer["command"].endswith("--set model.pointer_id=XX") and "variant_rule" in pointer
    assert pointer["test"]["status"] == {"well-formed": record["splits"]["test"]}
    for bad, message in ((["model.pointer_id=YY"], "YY is not a whole symbol"), (["model.P_drop=2"], "P_drop"),
                         (["model.pointer_id=XX", "--semi"], "without")):
        with pytest.raises(SystemExit) as stopped:
            script.main(argv + ["--set", *bad])
        assert message in capsys.readouterr().err + str(stopped.value)


def test_the_pilot_trains_each_setting_then_chooses_by_its_rule(tmp_path, monkeypatch):
    """scripts/parsing.py --pilot made small: each setting's record once its rounds are done, the
    choice only once every post-norm setting has one, never the pre-norm variant, and never a round
    whose encoder has not left the collapse."""
    import json

    script, small = parsing_script(tmp_path)
    # the profile at a setting that is not in the pilot's grid, as it was before the pilot chose
    monkeypatch.setattr(script, "PROFILE", script.PROFILE.replace(
        vocab_size=600, lr_factor=0.8,
        model=script.PROFILE.model | {"N": 1, "d_model": 32, "d_ff": 64, "h": 2, "d_k": 16,
                                      "d_v": 16, "P_drop": 0.2},
        save_every_steps=2, eval_every=2, keep_last=2, warmup_steps=2, round_steps=2))
    pt = script.pt
    monkeypatch.setattr(pt, "PILOT_ROUNDS", 2)
    # a 4-step model may not have left the collapse on any machine: here every round counts as out
    # of it, so that a setting is chosen (the rule itself is tested by hand below)
    monkeypatch.setattr(pt, "COLLAPSED", 1.01)
    grid = replace(pt.RATE_PILOT, settings=tuple(s for s in pt.RATE_PILOT.settings if s.name in (
        "f0.25-p0.1", "f0.4-p0.1", "prenorm-f0.25-p0.1")))
    monkeypatch.setattr(pt, "RATE_PILOT", grid)
    monkeypatch.setattr(pt, "PILOTS", (grid, *pt.PILOTS[1:]))
    argv = ["--run", str(tmp_path / "runs" / "parsing"), "--results", str(tmp_path / "results" / "parsing"),
            "--treebank", str(small), "--pilot"]
    script.main(argv + ["prenorm-f0.25-p0.1", "f0.25-p0.1"])
    pilot = tmp_path / "results" / "parsing-pilot"
    assert sorted(p.name for p in pilot.iterdir()) == ["f0.25-p0.1.json", "prenorm-f0.25-p0.1.json"]
    records = {p.stem: json.loads(p.read_text()) for p in pilot.iterdir()}
    pre = records["prenorm-f0.25-p0.1"]
    assert pre["model"]["norm_first"] and pre["model"]["P_drop"] == 0.1 and pre["lr_factor"] == 0.25
    assert pre["command"] == "python scripts/parsing.py --pilot prenorm-f0.25-p0.1"
    for r in records.values():
        assert [p["step"] for p in r["dev_curve"]] == [2, 4] and r["stopped_by"] == "2 rounds"
        assert set(r["dev_curve"][0]["dev_nll"]) == {"own_sentence", "another_sentence"}
        assert 0 < r["dev_curve"][0]["encoder_similarity"] <= 1
    assert (tmp_path / "runs" / "parsing-pilot" / "f0.25-p0.1" / "checkpoints").exists()
    script.main(argv + ["f0.4-p0.1"])
    chosen = json.loads((pilot / "results.json").read_text())
    assert set(chosen["settings"]) == set(grid.names) and chosen["rule"] == grid.rule
    # the final run begins with the chosen setting's rounds, once the profile holds that setting
    setting = chosen["chosen"]["setting"]
    argv = argv[:-1]
    with pytest.raises(SystemExit, match="give the profile the chosen setting first"):
        script.main(argv + ["--from-pilot"])
    monkeypatch.setattr(script, "PROFILE", script.pilot_setting(setting, pilot).apply(script.PROFILE))
    monkeypatch.setattr(pt, "BEAM", 2)
    monkeypatch.setattr(pt, "MAX_EXTRA", 10)
    script.main(argv + ["--from-pilot", "--max-minutes", "0.0001"])
    final = json.loads((tmp_path / "results" / "parsing" / "results.json").read_text())
    pilot_curve = json.loads((pilot / f"{setting}.json").read_text())["dev_curve"]
    assert final["dev_curve"][:2] == pilot_curve and final["training"]["first_rounds_from_pilot"] == setting
    assert final["command"] == "python scripts/parsing.py --from-pilot" and final["variant"] is None
    # a setting the profile does not hold goes on beside it, as a labelled variant
    with pytest.raises(SystemExit):
        script.main(argv + ["--from-pilot", "f0.3-p0.1"])
    script.main(argv + ["--from-pilot", "prenorm-f0.25-p0.1", "--max-minutes", "0.0001"])
    pre_final = json.loads((tmp_path / "results" / "parsing-prenorm-f0.25-p0.1" / "results.json").read_text())
    assert pre_final["variant"] == "prenorm-f0.25-p0.1" and pre_final["model"]["norm_first"]
    assert pre_final["command"] == "python scripts/parsing.py --from-pilot prenorm-f0.25-p0.1"
    assert pre_final["dev_curve"][:2] == records["prenorm-f0.25-p0.1"]["dev_curve"]
    assert (tmp_path / "runs" / "parsing-prenorm-f0.25-p0.1-select").exists()
    # the rule by hand, on records made up so that every branch decides
    monkeypatch.setattr(pt, "COLLAPSED", 0.9)
    point = dict(step=2, round=1, dev_ppl=3.0, encoder_similarity=0.5)
    made = {"f0.25-p0.1": {"dev_curve": [point | dict(dev_f1=40.0), point | dict(dev_f1=70.0,
                                                                                 encoder_similarity=0.95)]},
            "f0.4-p0.1": {"dev_curve": [point | dict(dev_f1=40.0, dev_ppl=2.0)]}}
    # (pre-norm is a variant: transformer.rounds.pilot never shows its record to the rule)
    assert pt.RATE_PILOT.variants == ("prenorm-f0.25-p0.1",)
    assert pt.pilot_choice(made)["setting"] == "f0.4-p0.1"
    made["f0.4-p0.1"]["dev_curve"][0]["encoder_similarity"] = 0.9
    assert pt.pilot_choice(made) == {"setting": "f0.25-p0.1", **point, "dev_f1": 40.0}
    made["f0.25-p0.1"]["dev_curve"][0]["encoder_similarity"] = 0.99
    assert pt.pilot_choice(made) is None



def test_the_vocabulary_attention_and_semi_supervised_pilots_choose_by_their_rules(tmp_path, monkeypatch):
    """scripts/parsing.py's later pilots made small. The word source reads one token per word (as the
    output writes one XX per word); each setting's record lands in its own pilot's folder; the choices
    follow VOCAB_RULE, ATTN_RULE (which reads the vocabulary pilot's choice as its rate 0) and SEMI_RULE;
    the final runs start from the chosen runs, average checkpoints where dev says so, and the
    semi-supervised row reads the silver treebank only when its record agrees."""
    import json

    from transformer.data import Vocab
    script, small = parsing_script(tmp_path)
    monkeypatch.setattr(script, "PROFILE", script.PROFILE.replace(
        vocab_size=600, model=script.PROFILE.model | {"N": 1, "d_model": 32, "d_ff": 64, "h": 2, "d_k": 16,
                                                      "d_v": 16},
        save_every_steps=2, eval_every=2, keep_last=2, warmup_steps=2, round_steps=2))
    pt = script.pt
    monkeypatch.setattr(pt, "PILOT_ROUNDS", 2)
    argv = ["--run", str(tmp_path / "runs" / "parsing"), "--results", str(tmp_path / "results" / "parsing"),
            "--treebank", str(small), "--pilot"]
    with pytest.raises(SystemExit, match="different pilots"):
        script.main(argv + ["word-source", "f0.25-p0.1"])
    script.main(argv + ["word-source"])
    pilot = tmp_path / "results" / "parsing-pilot-vocab"
    assert [p.name for p in pilot.iterdir()] == ["word-source.json"]
    word = Vocab.load(tmp_path / "runs" / "parsing-pilot-vocab" / "word-source" / "vocab.model")
    sentences = [" ".join(t.leaves()) for t in script.read_treebank(small)["dev"]]
    assert [len(ids) for ids in word.encode(sentences)] == [len(s.split()) for s in sentences]
    with pytest.raises(SystemExit, match="starts from the vocab pilot's choice"):
        script.main(argv + ["attn0.1"])
    script.main(argv + ["bpe-source"])
    chosen = json.loads((pilot / "results.json").read_text())
    assert chosen["rule"] == pt.VOCAB_PILOT.rule and set(chosen["settings"]) == set(pt.VOCAB_PILOT.names)
    records = {n: json.loads((pilot / f"{n}.json").read_text()) for n in pt.VOCAB_PILOT.names}
    assert records["word-source"]["vocab_model"] == "word" and records["bpe-source"]["vocab_model"] == "bpe"
    assert chosen["chosen"] == pt.last_rounds_choice(records)
    # the attention dropout pilot: the vocabulary pilot's choice with attention dropout, that choice's
    # own run the rate 0, not trained again
    script.main(argv + ["attn0.1", "attn0.2"])
    attn = json.loads((tmp_path / "results" / "parsing-pilot-attn" / "results.json").read_text())
    vocab = chosen["chosen"]["setting"]
    assert set(attn["chosen"]["all"]) == {vocab, "attn0.1", "attn0.2"} and attn["rule"] == pt.ATTN_PILOT.rule
    assert not (tmp_path / "runs" / "parsing-pilot-attn" / vocab).exists()
    record = json.loads((tmp_path / "results" / "parsing-pilot-attn" / "attn0.2.json").read_text())
    assert record["model"]["attn_drop"] == 0.2 and record["vocab_model"] == records[vocab]["vocab_model"]
    # the final run begins with the chosen run's rounds, and averages checkpoints where dev says so
    setting = attn["chosen"]["setting"]
    monkeypatch.setattr(script, "PROFILE", script.pilot_setting(setting, tmp_path / "results" / "parsing-pilot")
                        .apply(script.PROFILE).replace(average_last=2))
    monkeypatch.setattr(pt, "BEAM", 2)
    monkeypatch.setattr(pt, "MAX_EXTRA", 10)
    script.main(argv[:-1] + ["--from-pilot", setting, "--max-minutes", "0.0001"])
    final = json.loads((tmp_path / "results" / "parsing" / "results.json").read_text())
    assert final["variant"] is None and final["training"]["first_rounds_from_pilot"] == setting
    assert final["command"] == f"python scripts/parsing.py --from-pilot {setting}"
    averaging = final["averaging"]
    assert len(averaging["checkpoints"]) == 2 and set(averaging["dev_f1"]) == {"best round", "averaged"}
    assert averaging["chosen"] == max(averaging["dev_f1"], key=lambda k: (averaging["dev_f1"][k], k == "best round"))
    # Table 4's second row: the silver trees (here 40 of them) join the gold ones, two mixes tried
    import gzip
    silver = tmp_path / "silver" / "silver.jsonl.gz"
    silver.parent.mkdir()
    with gzip.open(script.SILVER, "rt") as f:
        rows = [line for line in f][:60]
    kept = sum(json.loads(r)["agreement"] == 100.0 and all(json.loads(r)["derived"]) for r in rows)
    with gzip.open(silver, "wt") as f:
        f.writelines(rows)
    (silver.parent / "silver.json").write_text(json.dumps({"kept": kept + 1}))
    monkeypatch.setattr(script, "SILVER", silver)
    with pytest.raises(SystemExit, match="its record says"):
        script.main(argv + ["semi-mixed"])
    (silver.parent / "silver.json").write_text(json.dumps({"kept": kept}))
    with pytest.raises(SystemExit, match="the pilot has not chosen yet"):
        script.main(argv[:-1] + ["--semi"])
    script.main(argv + ["semi-mixed", "semi-gold3"])
    corpus = tmp_path / "runs" / "parsing-corpus" / "ptb"
    assert len((corpus / "silver.tree").read_text().splitlines()) == kept
    semi = json.loads((tmp_path / "results" / "parsing-pilot-semi" / "results.json").read_text())
    assert semi["rule"] == pt.SEMI_PILOT.rule and set(semi["chosen"]["all"]) == set(pt.SEMI_PILOT.names)
    script.main(argv[:-1] + ["--semi", "--max-minutes", "0.0001"])
    row = json.loads((tmp_path / "results" / "parsing-semi" / "results.json").read_text())
    assert row["row"] == "semi-supervised" and row["variant"] is None and row["command"].endswith("--semi")
    assert row["corpus"] == script.pilot_setting(semi["chosen"]["setting"], tmp_path / "results" / "parsing-pilot").changes["corpus"]
    assert row["splits"]["silver"] == kept and row["training"]["first_rounds_from_pilot"] == semi["chosen"]["setting"]
    # a point of the row's curve: the first N kept trees of the large treebank's shards, as its record counts
    large = tmp_path / "large"
    (large / "shards").mkdir(parents=True)
    with gzip.open(large / "shards" / "shard-00000.jsonl.gz", "wt") as f:
        f.writelines([json.dumps({"seconds": 1.0, "teachers": ["a", "b"]}) + "\n"] + rows)
    (large / "silver.json").write_text(json.dumps({"sentences": len(rows), "kept": kept + 1, "shards": {"done": 1}}))
    monkeypatch.setattr(script, "LARGE_SILVER", large)
    monkeypatch.setattr(pt, "CURVE_SIZES", (kept - 5, kept + 1))
    with pytest.raises(SystemExit, match="write the record again"):
        script.main(argv[:-1] + ["--silver", str(kept - 5)])
    (large / "silver.json").write_text(json.dumps({"sentences": len(rows), "kept": kept, "shards": {"done": 1},
                                                   "commit": "abc"}))
    with pytest.raises(SystemExit, match="fewer than"):
        script.main(argv[:-1] + ["--silver", str(kept + 1)])
    with pytest.raises(SystemExit) as refused:                      # argparse's usage error
        script.main(argv[:-1] + ["--silver", str(kept - 5), "--semi"])
    assert refused.value.code == 2
    script.main(argv[:-1] + ["--silver", str(kept - 5), "--max-minutes", "0.0001"])
    point = json.loads((tmp_path / "results" / f"parsing-silver-{kept - 5}" / "results.json").read_text())
    assert point["splits"]["silver"] == kept - 5 == point["silver"]["trees"] and point["curve_rule"] == pt.CURVE_RULE
    assert point["silver"]["teachers"] == [["a", "b"]] and point["silver"]["record_commit"] == "abc"
    assert point["row"] == "semi-supervised" and point["training"]["first_rounds_from_pilot"] is None
    assert point["corpus"] == row["corpus"] and point["command"].endswith(f"--silver {kept - 5}")
    corpus = tmp_path / "runs" / f"parsing-silver-{kept - 5}-corpus" / "ptb"
    assert len((corpus / "silver.tree").read_text().splitlines()) == kept - 5
    # the rule by hand: the mean of the last rounds decides; within 0.1 F1, the lower perplexity
    monkeypatch.setattr(pt, "VOCAB_LAST", 2)
    curve = lambda *points: {"dev_curve": [dict(round=i, dev_f1=f, dev_ppl=p) for i, (f, p) in enumerate(points)]}
    made = {"bpe-source": curve((60, 2.0), (20, 2.0), (30, 2.0)), "word-source": curve((10, 3.0), (26, 3.0), (26, 3.0))}
    assert pt.last_rounds_choice(made)["setting"] == "word-source"
    made["bpe-source"] = curve((60, 2.0), (22, 2.0), (29.9, 2.0))
    assert pt.last_rounds_choice(made)["setting"] == "bpe-source"

TREES = [T("(S (NP (DT the) (NN cat)) (VP (VBD sat) (PP (IN on) (NP (DT a) (NN mat)))) (. .))"),
         T("(S (NP (NNS dogs)) (VP (VBP run) (ADVP (RB fast))))"),
         T("(S (NP (PRP He)) (VP (VBD gave) (PRT (RP up)) (, ,) (ADVP (RB then))) (. .))")]
SENTENCES = ["the cat sat on a mat .", "dogs run fast", "He gave up , then .", "cat", "a b c d e f g h i j k"]


@pytest.fixture(scope="module")
def tree_vocab():
    from transformer.data import train_vocab
    pairs = [(" ".join(w), " ".join(t)) for w, t in map(linearize, TREES)]
    # as the trainer does: the target side's own words stay whole
    symbols = {s for _, t in pairs for s in t.split()} - {w for s, _ in pairs for w in s.split()}
    return train_vocab(pairs * 30, vocab_size=310, symbols=sorted(symbols))


@pytest.mark.parametrize("beam_size", [1, 3])
@pytest.mark.parametrize("max_extra", [3, 40])
def test_constrained_decoding_writes_only_trees_over_the_words(tree_vocab, beam_size, max_extra):
    """An untrained model, whose free outputs are not trees, writes one tree per sentence with one XX per word,
    even when the length limit is tight."""
    import torch

    from transformer.decode import translate
    from transformer.model import Transformer, TransformerConfig
    constraint = TreeConstraint(tree_vocab, max_extra=max_extra)
    for seed in range(3):
        torch.manual_seed(seed)
        model = Transformer(TransformerConfig.preset("tiny"), len(tree_vocab))
        outputs = translate(model, tree_vocab, SENTENCES, beam_size=beam_size, max_extra=max_extra,
                            progress=False, constrain=constraint.for_sentences)
        for out, sentence in zip(outputs, SENTENCES):
            assert delinearize(out.split(), sentence.split()).leaves() == sentence.split()


def test_the_constraint_allows_every_gold_tree_and_refuses_a_plain_vocabulary(tree_vocab):
    import torch

    from transformer.data import BOS, EOS, train_vocab
    constraint = TreeConstraint(tree_vocab, max_extra=300)
    for tree in TREES:
        words, tokens = linearize(tree)
        ids = [BOS] + tree_vocab.encode(" ".join(tokens)) + [EOS]
        n = torch.tensor([len(words)])
        for t in range(1, len(ids)):
            assert constraint.allowed(torch.tensor([ids[:t]]), n)[0, ids[t]], (tokens, t)
        # after the whole tree only the end; after the root's opening, never the end
        assert constraint.allowed(torch.tensor([ids[:-1]]), n)[0].nonzero().flatten().tolist() == [EOS]
        assert not constraint.allowed(torch.tensor([ids[:2]]), n)[0, EOS]
    plain = train_vocab([(" ".join(w), " ".join(t)) for w, t in map(linearize, TREES)] * 30, vocab_size=300)
    with pytest.raises(ValueError, match="whole tree symbols"):
        TreeConstraint(plain, max_extra=300)


def test_opening_tags_count_brackets_that_open_at_their_head_word():
    from transformer.parsing import opening_tags
    gold = T("(S (NP (DT the) (NN cat)) (VP (VBD sat) (PP (IN on) (NP (DT the) (NN mat)))) (. .))")
    # the same labels, every bracket one word to the right of where it belongs
    shifted = T("(S (NP (DT the) (NN cat) (VBD sat)) (VP (IN on) (PP (DT the) (NP (NN mat)))) (. .))")
    assert opening_tags([gold], [gold]) == {"PP": {"brackets": 1, "opening": 1},
                                            "VP": {"brackets": 1, "opening": 1},
                                            "SBAR": {"brackets": 0, "opening": 0}}
    assert opening_tags([gold], [shifted])["PP"] == {"brackets": 1, "opening": 0}
    assert opening_tags([gold], [shifted])["VP"] == {"brackets": 1, "opening": 0}
    # the gold tags decide, not the tree's own, and punctuation before the head does not count
    quoted = T("(S (NP (NNS cats)) (VP (VBP sit) (PP (`` ``) (IN on) (NP (NNS mats)))))")
    retagged = T("(S (NP (X cats)) (VP (X sit) (PP (X ``) (X on) (NP (X mats)))))")
    assert opening_tags([quoted], [retagged])["PP"] == {"brackets": 1, "opening": 1}
    assert opening_tags([gold], [None])["PP"]["brackets"] == 0       # a sentence without a tree
    with pytest.raises(ValueError):
        opening_tags([gold, gold], [gold])


def test_f1_by_length_and_sentences_as_good_as_a_reference():
    from transformer.parsing import LENGTH_BINS, as_good_as, f1_by_length, flat_tree
    short = TOY[1]                                                    # 4 words
    long_ = T("(S " + " ".join(["(NP (DT a) (NN dog))"] * 6) + " (VP (VBD ran)))")     # 13 words
    rows = f1_by_length([short, long_], [short, flat_tree(long_.pos())])
    assert [r["words"] for r in rows] == ["1-10", "11-20", "21-30", "31-40", "41+"]
    assert len(rows) == len(LENGTH_BINS) and [r["sentences"] for r in rows] == [1, 1, 0, 0, 0]
    assert rows[0]["f1"] == pytest.approx(100.0) and rows[1]["f1"] < 100 and rows[2]["f1"] is None
    flat = [flat_tree(t.pos()) for t in TOY]
    assert as_good_as(TOY, TOY, flat) == len(TOY)                    # gold beats the floor everywhere
    assert as_good_as(TOY, flat, flat) == len(TOY)                   # a tie counts as at least as good
    assert as_good_as(TOY, flat, list(TOY)) == 0


def test_f1_difference_is_the_score_difference_with_a_paired_bootstrap_interval():
    from transformer.parsing import f1_difference, flat_tree, right_branching_tree
    gold = list(TOY) * 10
    flat = [flat_tree(t.pos()) for t in gold]
    right = [right_branching_tree(t.pos()) for t in gold]
    gap = f1_difference(gold, right, flat, samples=500)
    assert gap["difference"] == pytest.approx(bracket_scores(gold, right)["f1"] - bracket_scores(gold, flat)["f1"])
    assert gap["low"] <= gap["difference"] <= gap["high"] and gap["samples"] == 500
    assert gap == f1_difference(gold, right, flat, samples=500)      # one seed, one answer
    # paired: a parser against itself differs by nothing on every draw
    assert f1_difference(gold, flat, flat, samples=200) == {"difference": 0.0, "low": 0.0, "high": 0.0,
                                                             "samples": 200}
    # gold against a floor: above zero on every draw; the same pair the other way round, below
    above, below = f1_difference(gold, gold, flat, samples=200), f1_difference(gold, flat, gold, samples=200)
    assert above["low"] > 0 and below["high"] < 0 and above["difference"] == pytest.approx(-below["difference"])
    with pytest.raises(ValueError):
        f1_difference(gold, flat[:-1], flat)


def test_the_silver_rule_keeps_agreeing_derived_trees_only():
    from transformer.parsing import silver_kept
    assert silver_kept({"derived": [True, True], "agreement": 100.0})
    assert not silver_kept({"derived": [True, False], "agreement": 100.0})   # one grammar fell back to flat
    assert not silver_kept({"derived": [True, True], "agreement": 99.5})


def test_silver_workers_share_the_shards_without_parsing_one_twice(tmp_path, monkeypatch):
    silver = script_module("silver_treebank")
    parsed = []

    def parse_both(grammars, tagged):        # stands for the two grammars; records what it was given
        parsed.append(tagged[0][0])
        return Tree("S", [Tree(t, [w]) for w, t in tagged]), [True, True], 100.0
    monkeypatch.setattr(silver, "parse_both", parse_both)
    bank = replace(silver.TREEBANKS["large"], shard=2)
    sentences = [("wsj", [(f"w{i}", "NN"), ("x", "NN"), ("y", "NN")]) for i in range(7)]
    for worker in ((1, 3), (0, 3), (2, 3), (1, 3)):          # the last one finds its shards done
        silver.parse_shards(bank, sentences, tmp_path, None, None, worker=worker)
    assert sorted(parsed) == [f"w{i}" for i in range(7)]    # each sentence once, all of them
    entries, done = silver.summary(bank, range(0, 7, 2), tmp_path)
    assert [e["tree"].split()[2] for e in entries] == [f"w{i})" for i in range(7)]
    assert done["per_source"] == {"wsj": {"sentences": 7, "kept": 7}}


def test_the_learning_curve_verdict_follows_its_rule():
    """VERDICT_RULE, committed before the points beyond 0 trained: none until every size has a point; reaches at
    REACH_F1; else flattened where the last two doublings add less than FLAT_F1; else rises."""
    from transformer.parser_training import CURVE_SIZES, curve_verdict
    f1 = lambda *scores: {size: {"test_f1": s} for size, s in zip((0, *CURVE_SIZES), scores)}
    assert curve_verdict(f1(37.7, 49, 55, 56)) is None                       # a point still to run
    assert curve_verdict(f1(37.7, 49, 55, 56, 56.9))["outcome"] == "flattened"  # 12.5K -> 50K adds 1.9
    assert curve_verdict(f1(37.7, 49, 55, 56, 57.5))["outcome"] == "rises"
    assert curve_verdict(f1(37.7, 49, 55, 60, 65.0))["outcome"] == "reaches"
    curve = script_module("parsing_curve")
    assert not curve.in_history("0" * 40) and not curve.in_history(None) and curve.in_history("HEAD")
