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
from transformer.rounds import dev_decides, train_in_rounds  # noqa: E402
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


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", default=str(ROOT / "runs" / "zh-en"))
    parser.add_argument("--results", default=str(ROOT / "results" / "zh-en"))
    parser.add_argument("--seed-dir", help="folder holding zh-en-seed/ (default $TRANSFORMER_DATA)")
    parser.add_argument("--max-minutes", type=float, default=60.0,
                        help="stop a run's training after this many minutes even if dev BLEU still improves")
    parser.add_argument("--only", choices=["zh-en", "zh-en-tutorial"],
                        help="train (or resume) one of the two runs and stop, writing no record")
    args = parser.parse_args(argv)
    runs, results = Path(args.runs), Path(args.results)
    data_root = runs / "data"
    counts = prepare_zh_en(data_root, args.seed_dir)
    record = {"task": "English->Chinese, the PyTorch tutorial's corpus (zh-en-seed)",
              "splits": counts, "profile": PROFILE.name,
              "model": PROFILE.model, "vocab_size": PROFILE.vocab_size}
    outputs = {}
    for corpus in ("zh-en", "zh-en-tutorial"):
        if args.only and corpus != args.only:
            continue
        record[corpus], outputs[corpus] = run(corpus, runs, data_root, args.max_minutes)
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
