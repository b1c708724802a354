"""Appendix A's result: the English->Chinese task of a widely read PyTorch tutorial, one model trained
until it fits its training pairs (perplexity on them at most 3), then scored on pairs it trained on and
on pairs it never saw.

    python scripts/zh_en.py          # prepares the splits, trains (or resumes) the model, scores it

The tutorial tests on 683 pairs that are all training pairs. transformer.corpora.prepare_zh_en writes
that split and ours, in which no dev or test sentence is a training sentence. The model trains on our
split with the zh-en profile (a 6,000-entry joint vocabulary, about half of it the corpus's Chinese
characters; d_model 128), whose learning-rate factor and P_drop are the cure for the encoder's collapse
that chapter 6.3's pilot chose for the parser (read from results/parsing-pilot/results.json). It trains
in rounds until it fits its training pairs (greedy exact matches on the tutorial's test pairs that are
training pairs of our split >= FIT_EXACT, or their perplexity <= FIT_PPL) or FIT_ROUNDS rounds. Its last
round is the model: the same model translates those seen pairs and our held-out test (beam 4,
alpha 0.6), each scored by BLEU with sacreBLEU's Chinese tokenizer, exact matches and repeats. Killed at
any point, the command resumes. Results go to results/zh-en-fit/ (seen.zh and test.zh beside the record;
the first three lines of each are the page's examples, a rule fixed before the run).
"""
import argparse
import json
import re
import sys
from dataclasses import astuple
from pathlib import Path


ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from transformer.corpora import load_split, prepare_zh_en  # noqa: E402
from transformer.decode import translate  # noqa: E402
from transformer.evaluate import sacre_bleu  # noqa: E402
from transformer.paper import DECODING  # noqa: E402
from transformer.parser_training import RATE_PILOT  # noqa: E402
from transformer.profiles import get_profile  # noqa: E402
from transformer.rounds import budget, train_in_rounds  # noqa: E402
from transformer.run import DEV_LOG, TRAIN_LOG, keep_record, load_model  # noqa: E402
from transformer.runlog import add_uncommitted_flag, refuse_uncommitted, write_record  # noqa: E402
from transformer.step import pairs_loss  # noqa: E402

# A small post-norm model with the paper's recipe for 6,800 pairs of news text, a 6,000-entry
# vocabulary set in advance for so small a corpus (the paper: 37,000 for 4.5M pairs), and the rate and
# dropout that let the parser's encoder read its sentence (chapter 6.3's pilot).
PROFILE = get_profile("zh-en")          # transformer/profiles.py: d_model 128, P_drop 0.1
BEAM, ALPHA = DECODING["beam_size"], DECODING["alpha"]  # the paper's search
# a word written three times in a row: the mark of a model that has not learned when to move on
REPEAT = re.compile(r"(\S+)( \1){2}")


def zh_bleu(hyps, refs):
    """sacreBLEU with its Chinese tokenizer (each CJK character is a token): (score, signature)."""
    return sacre_bleu(hyps, refs, tokenize="zh")


def repeat_rate(hyps):
    return sum(bool(REPEAT.search(h)) for h in hyps) / len(hyps)


def dev_bleu(pairs):
    """score(model, vocab) for train_in_rounds: greedy BLEU on `pairs`."""
    def score(model, vocab):
        hyps = translate(model, vocab, [s for s, _ in pairs], beam_size=1, progress=False)
        return {"dev_bleu": round(zh_bleu(hyps, [t for _, t in pairs])[0], 2),
                "dev_repeats": round(repeat_rate(hyps), 4)}
    return score


def perplexity(model, vocab, pairs):
    """Perplexity per target piece on `pairs`, without dropout."""
    return round(pairs_loss(model, vocab, pairs, PROFILE.max_tokens)["dev_ppl"], 3)


# what "fits its training pairs" means, fixed before the run: half of them translated exactly, or a
# perplexity of 3 on them; and the most rounds it may take (15,000 steps)
FIT_EXACT, FIT_PPL, FIT_ROUNDS = 0.5, 3.0, 150
SEEN_PER_ROUND = 200        # seen pairs translated after every round (all of them at the end)


def exact_rate(hyps, refs):
    """The share of translations equal to their reference, spaces aside (the references are cut
    into words, the model's output is not)."""
    return sum("".join(h.split()) == "".join(r.split()) for h, r in zip(hyps, refs)) / len(refs)


def seen_pairs(data_root):
    """The tutorial's test pairs that are training pairs of our split: what the tutorial scores."""
    train = set(load_split("zh-en", "train", data_root))
    return [pair for pair in load_split("zh-en-tutorial", "test", data_root) if pair in train]


def fit_score(dev, seen):
    """score(model, vocab) for --fit: greedy dev BLEU, and how well the model knows seen pairs."""
    def score(model, vocab):
        hyps = translate(model, vocab, [s for s, _ in seen[:SEEN_PER_ROUND]], beam_size=1, progress=False)
        return {**dev_bleu(dev)(model, vocab), "seen_ppl": perplexity(model, vocab, seen),
                "seen_exact": round(exact_rate(hyps, [t for _, t in seen[:SEEN_PER_ROUND]]), 4)}
    return score


def fits(curve):
    """The stop rule of --fit: the last round fits its training pairs (perplexity on them at most FIT_PPL,
    or FIT_EXACT of them reproduced word for word)."""
    last = curve[-1] if curve else None
    if last and (last["seen_exact"] >= FIT_EXACT or last["seen_ppl"] <= FIT_PPL):
        return f"fits its training pairs (exact {last['seen_exact']:.0%}, perplexity {last['seen_ppl']})"
    return None


def cured_profile(pilot_results):
    """PROFILE with the setting the parser pilot chose (its lr_factor and P_drop): (profile, the cure)."""
    path = Path(pilot_results) / "results.json"
    try:
        setting = RATE_PILOT.chosen(pilot_results)
    except ValueError:
        setting = None
    if setting is None:
        sys.exit(f"--fit takes its cure from the parser pilot's choice, and {path} has none yet: "
                 f"run python scripts/parsing.py --pilot first")
    profile = setting.apply(PROFILE)
    return profile, {"setting": setting.name, "lr_factor": profile.lr_factor,
                     "P_drop": profile.model["P_drop"], "from": str(path.relative_to(path.parents[2]))}


def fit(runs, results, data_root, pilot_results, max_minutes):
    profile, cure = cured_profile(pilot_results)
    run = runs / "zh-en-fit"
    dev, seen, test = (load_split("zh-en", "dev", data_root), seen_pairs(data_root),
                       load_split("zh-en", "test", data_root))
    curve, _, stopped = astuple(train_in_rounds(
        profile, run, profile.round_steps, fit_score(dev, seen),
        [fits, budget(minutes=max_minutes), budget(rounds=FIT_ROUNDS)], data_root=data_root))
    model, vocab, _ = load_model(run, 1)       # the last round: the model that fits
    scored = {}
    results.mkdir(parents=True, exist_ok=True)
    for name, pairs in (("seen", seen), ("test", test)):
        hyps = translate(model, vocab, [s for s, _ in pairs], beam_size=BEAM, alpha=ALPHA, progress=False)
        refs = [t for _, t in pairs]
        (results / f"{name}.zh").write_text("\n".join(hyps) + "\n", encoding="utf-8")
        scored[name] = {"sentences": len(pairs), "bleu": round(zh_bleu(hyps, refs)[0], 2),
                        "exact": round(exact_rate(hyps, refs), 4), "repeats": round(repeat_rate(hyps), 4),
                        "ppl": perplexity(model, vocab, pairs), "signature": zh_bleu(hyps, refs)[1]}
    keep_record(run, results, (DEV_LOG, TRAIN_LOG))
    record = {
        "task": "English->Chinese, our split of the tutorial's corpus; one model scored on pairs it "
                "trained on (the tutorial's test pairs that are training pairs of our split) and on our "
                "held-out test",
        "profile": profile.name, "model": profile.model, "vocab_size": profile.vocab_size,
        "lr_factor": profile.lr_factor, "cure": cure,
        "fit_target": {"exact": FIT_EXACT, "ppl": FIT_PPL, "max_rounds": FIT_ROUNDS},
        "training": {"steps": curve[-1]["step"], "epochs": curve[-1]["epoch"],
                     "train_minutes": curve[-1]["train_minutes"], "parameters": model.num_parameters(),
                     "round_steps": profile.round_steps, "stopped_by": stopped},
        "dev_curve": curve, "beam_size": BEAM, "alpha": ALPHA, **scored,
        "memorisation_gap": round(scored["seen"]["bleu"] - scored["test"]["bleu"], 2),
        "examples": "the first three lines of seen.zh and test.zh",
    }
    write_record(results / "results.json", record, "python scripts/zh_en.py --fit")
    print(json.dumps({k: record[k] for k in ("training", "seen", "test", "memorisation_gap")}, indent=1,
                     ensure_ascii=False))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", default=str(ROOT / "runs" / "zh-en"))
    parser.add_argument("--results", default=str(ROOT / "results" / "zh-en-fit"))
    parser.add_argument("--seed-dir", help="folder holding zh-en-seed/ (default $TRANSFORMER_DATA)")
    parser.add_argument("--max-minutes", type=float,
                        help="stop training after this many minutes even if the model does not fit yet")
    parser.add_argument("--fit", action="store_true",
                        help="the only mode (kept so that the command in the record runs as written)")
    parser.add_argument("--pilot-results", default=str(ROOT / "results" / "parsing-pilot"),
                        help="the parser pilot's records, whose choice is the cure")
    add_uncommitted_flag(parser)
    args = parser.parse_args(argv)
    refuse_uncommitted(args.results, args.uncommitted)
    runs = Path(args.runs)
    data_root = runs / "data"
    prepare_zh_en(data_root, args.seed_dir)
    fit(runs, Path(args.results), data_root, args.pilot_results, args.max_minutes)


if __name__ == "__main__":
    main()
