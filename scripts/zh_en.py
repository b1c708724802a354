"""Appendix A's result: the English->Chinese task of a widely read PyTorch tutorial, trained twice.

    python scripts/zh_en.py          # prepares the splits, trains (or resumes) both runs, scores them
    python scripts/zh_en.py --only zh-en     # one run only (the two can train side by side), no record

1. `zh-en-tutorial`: the tutorial's own split. Training on all 6,834 pairs and testing on its 683
   test pairs, every one of which is a training pair: the score measures memorisation. Its dev set
   is its test set, as in the tutorial.
2. `zh-en`: our split, with no dev or test sentence in training (transformer.corpora.prepare_zh_en).

Both runs use the same profile, sized for 6,800 pairs (a 6,000-entry joint vocabulary, about half
of it the corpus's Chinese characters; d_model 128), and train in rounds until greedy dev BLEU has
not improved for the profile's patience in rounds, counted from its min_rounds on
(transformer.rounds.train_in_rounds); the best round is the model. Test is translated once,
with beam 4 and alpha 0.6, and scored with sacreBLEU's Chinese tokenizer. Also recorded: perplexity
on training sentences, and how often a translation repeats a word three times in a row. Killed at
any point, the command resumes. Results go to results/zh-en/.

    python scripts/zh_en.py --fit    # one model on our split, trained until it knows its training pairs

The memorisation gap within one model: our split's model, with the cure for the encoder's collapse
that chapter 6.3's pilot chose for the parser (its lr_factor and P_drop, read from
results/parsing-pilot/results.json), trained in rounds until it fits its training pairs (greedy exact
matches on the tutorial's test pairs that are training pairs of our split >= FIT_EXACT, or their
perplexity <= FIT_PPL) or FIT_ROUNDS rounds. Its last round is the model: the same model then
translates those seen pairs and our held-out test (beam 4, alpha 0.6), each scored by BLEU, exact
matches and repeats. Results go to results/zh-en-fit/ (seen.zh and test.zh beside the record; the
first three lines of each are the page's examples, a rule fixed before the run).
"""
import argparse
import json
import re
import sys
import time
from dataclasses import astuple
from pathlib import Path


ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from transformer.corpora import load_split, prepare_zh_en  # noqa: E402
from transformer.decode import translate  # noqa: E402
from transformer.evaluate import sacre_bleu  # noqa: E402
from transformer.paper import DECODING  # noqa: E402
from transformer.profiles import get_profile  # noqa: E402
from transformer.rounds import budget, dev_decides, train_in_rounds  # noqa: E402
from transformer.run import BEST, CURVE, DEV_LOG, TRAIN_LOG, keep_record, load_model  # noqa: E402
from transformer.runlog import write_record  # noqa: E402
from transformer.step import pairs_loss  # noqa: E402

# A small post-norm model with the paper's recipe for 6,800 pairs of news text; P_drop 0.3 and the
# 6,000-entry vocabulary set in advance for so small a corpus (the paper: 0.1 and 37,000 for 4.5M pairs).
PROFILE = get_profile("zh-en")          # transformer/profiles.py: d_model 128, P_drop 0.3
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


def run(corpus, runs, data_root, max_minutes):
    profile = PROFILE.replace(name=corpus, corpus=corpus)     # zh-en-tutorial: that profile
    out = runs / corpus
    dev = load_split(corpus, "dev", data_root)
    # rounds, patience and the most rounds are the profile's (transformer/profiles.py says why)
    select = runs / f"{corpus}-select"
    curve, best, stopped = astuple(train_in_rounds(
        profile, out, profile.round_steps, dev_bleu(dev), dev_decides(profile, "dev_bleu", max_minutes),
        key="dev_bleu", best_path=select / BEST, curve_path=select / CURVE, data_root=data_root))
    model, vocab, _ = load_model(runs / f"{corpus}-select" / BEST)
    pairs = load_split(corpus, "test", data_root)
    started = time.time()
    hyps = translate(model, vocab, [s for s, _ in pairs], beam_size=BEAM, alpha=ALPHA, progress=False)
    translate_seconds = round(time.time() - started, 1)
    bleu, signature = zh_bleu(hyps, [t for _, t in pairs])
    train_pairs = load_split(corpus, "train", data_root)
    return {"corpus": corpus,
            "training": {"steps": curve[-1]["step"], "epochs": curve[-1]["epoch"],
                         "train_minutes": curve[-1]["train_minutes"], "train_pairs": curve[-1]["train_pairs"],
                         "parameters": model.num_parameters(), "round_steps": profile.round_steps, "patience": profile.patience,
                         "stopped_by": stopped},
            "dev_curve": curve,
            "chosen": {k: best[k] for k in ("round", "step", "epoch", "dev_bleu")},
            "test_sentences": len(pairs), "beam_size": BEAM, "alpha": ALPHA,
            "test_bleu": round(bleu, 2), "signature": signature,
            "test_repeats": round(repeat_rate(hyps), 4),
            # the first 500 training pairs: sentences the model was trained on
            "train_ppl": perplexity(model, vocab, train_pairs[:500]),
            "dev_ppl": perplexity(model, vocab, dev),
            "translate_seconds": translate_seconds}, hyps


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
    """The stop rule of --fit: the last round knows its training pairs."""
    last = curve[-1] if curve else None
    if last and (last["seen_exact"] >= FIT_EXACT or last["seen_ppl"] <= FIT_PPL):
        return f"fits its training pairs (exact {last['seen_exact']:.0%}, perplexity {last['seen_ppl']})"
    return None


def cured_profile(pilot_results):
    """PROFILE with the parser pilot's chosen lr_factor and P_drop: (profile, the pilot's choice)."""
    path = Path(pilot_results) / "results.json"
    chosen = json.loads(path.read_text())["chosen"] if path.exists() else None
    if chosen is None:
        sys.exit(f"--fit takes its cure from the parser pilot's choice, and {path} has none yet: "
                 f"run python scripts/parsing.py --pilot first")
    setting = json.loads((Path(pilot_results) / f"{chosen['setting']}.json").read_text())
    profile = PROFILE.replace(lr_factor=setting["lr_factor"],
                              model={**PROFILE.model, "P_drop": setting["model"]["P_drop"]})
    return profile, {"setting": chosen["setting"], "lr_factor": profile.lr_factor,
                     "P_drop": setting["model"]["P_drop"], "from": str(path.relative_to(path.parents[2]))}


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
    parser.add_argument("--results", help="default results/zh-en, or results/zh-en-fit with --fit")
    parser.add_argument("--seed-dir", help="folder holding zh-en-seed/ (default $TRANSFORMER_DATA)")
    parser.add_argument("--max-minutes", type=float,
                        help="stop a run's training after this many minutes even if dev BLEU still improves "
                             "(default 60; none with --fit)")
    parser.add_argument("--only", choices=["zh-en", "zh-en-tutorial"],
                        help="train (or resume) one of the two runs and stop, writing no record")
    parser.add_argument("--fit", action="store_true",
                        help="train one model on our split until it knows its training pairs, with the parser "
                             "pilot's cure, and score it on seen and held-out pairs (results/zh-en-fit)")
    parser.add_argument("--pilot-results", default=str(ROOT / "results" / "parsing-pilot"),
                        help="with --fit: the parser pilot's records, whose choice is the cure")
    args = parser.parse_args(argv)
    runs = Path(args.runs)
    data_root = runs / "data"
    counts = prepare_zh_en(data_root, args.seed_dir)
    if args.fit:
        return fit(runs, Path(args.results or ROOT / "results" / "zh-en-fit"), data_root, args.pilot_results,
                   args.max_minutes)
    results, max_minutes = Path(args.results or ROOT / "results" / "zh-en"), args.max_minutes or 60.0
    record = {"task": "English->Chinese, the PyTorch tutorial's corpus (zh-en-seed)",
              "splits": counts, "profile": PROFILE.name,
              "model": PROFILE.model, "vocab_size": PROFILE.vocab_size}
    outputs = {}
    for corpus in ("zh-en", "zh-en-tutorial"):
        if args.only and corpus != args.only:
            continue
        record[corpus], outputs[corpus] = run(corpus, runs, data_root, max_minutes)
    if args.only:
        return
    results.mkdir(parents=True, exist_ok=True)
    for corpus, hyps in outputs.items():
        (results / f"{corpus}.test.zh").write_text("\n".join(hyps) + "\n", encoding="utf-8")
        keep_record(runs / corpus, results, (DEV_LOG, TRAIN_LOG), prefix=f"{corpus}.")
    record["memorisation_gap"] = round(record["zh-en-tutorial"]["test_bleu"] - record["zh-en"]["test_bleu"], 2)
    write_record(results / "results.json", record)
    print(json.dumps({k: v for k, v in record.items() if k not in ("zh-en", "zh-en-tutorial")},
                     indent=1, ensure_ascii=False))


if __name__ == "__main__":
    main()
