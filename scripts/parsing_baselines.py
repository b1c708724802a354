"""Chapter 6.3's baselines: where a parser stands on the same test sentences and with the same scorer.

    python scripts/parsing_baselines.py      # about 4 minutes on a 2-core CPU

Two floors (the flat tree, the right-branching tree) and a PCFG read from the training trees, parsed with
CKY (transformer.parsing.PCFG). The PCFG's Markov orders (horizontal 1 or 2, vertical 1 or 2) are chosen on
the dev split with gold tags; the chosen grammar then parses the test split twice: with the gold tags, and
with the tags of a perceptron tagger trained on the training trees alone (words in, like the Transformer).
Writes results/parsing/baselines.json (scores, the dev grid, tagging accuracy, hardware, date, commit,
command) and the PCFG's test trees, one per line: pcfg.gold_tags.test.pred.mrg, pcfg.tagger.test.pred.mrg.
"""
import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from transformer.parsing import (PCFG, bracket_scores, flat_tree, pcfg_parse, read_treebank,  # noqa: E402
                                 right_branching_tree, train_tagger, write_trees)
from transformer.runlog import add_uncommitted_flag, refuse_uncommitted, write_record  # noqa: E402

ORDERS = [(1, 1), (1, 2), (2, 1), (2, 2)]       # (horizontal, vertical) Markov orders tried on dev


def rounded(scores):
    return {k: round(v, 3) if isinstance(v, float) else v for k, v in scores.items()}


def parse_all(grammar, tagged_sentences):
    """Trees for every sentence, and how many the grammar derived (the rest are flat)."""
    trees, found = [], 0
    for tagged in tagged_sentences:
        tree, ok = pcfg_parse(grammar, tagged)
        trees.append(tree)
        found += ok
    return trees, found


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", default=str(ROOT / "results" / "parsing"),
                        help="folder for baselines.json and the predicted trees")
    parser.add_argument("--treebank", help="folder of wsj_NNNN.mrg files (default: DATA/ptb-sample or NLTK's)")
    add_uncommitted_flag(parser)
    args = parser.parse_args(argv)
    results = Path(args.results)
    refuse_uncommitted(results, args.uncommitted)
    results.mkdir(parents=True, exist_ok=True)
    started = time.time()
    treebank = read_treebank(args.treebank)
    train, dev, test = treebank["train"], treebank["dev"], treebank["test"]

    grid = []
    for horizontal, vertical in ORDERS:
        grammar = PCFG(train, horizontal, vertical)
        trees, found = parse_all(grammar, [t.pos() for t in dev])
        grid.append({"horizontal": horizontal, "vertical": vertical, "rules": len(grammar.binary)
                     + len(grammar.unary), "derived": found, **rounded(bracket_scores(dev, trees))})
        print(f"dev, PCFG h={horizontal} v={vertical}: F1 {grid[-1]['f1']:.2f}", flush=True)
    chosen = max(grid, key=lambda row: row["f1"])
    grammar = PCFG(train, chosen["horizontal"], chosen["vertical"])

    tagger = train_tagger(train)
    predicted_tags = [tagger.tag(t.leaves()) for t in test]
    pairs = [(a[1], b[1]) for t, tagged in zip(test, predicted_tags) for a, b in zip(t.pos(), tagged)]
    tag_accuracy = sum(g == p for g, p in pairs) / len(pairs)

    gold_trees, gold_found = parse_all(grammar, [t.pos() for t in test])
    tagger_trees, tagger_found = parse_all(grammar, predicted_tags)
    write_trees(results / "pcfg.gold_tags.test.pred.mrg", gold_trees)
    write_trees(results / "pcfg.tagger.test.pred.mrg", tagger_trees)
    test_scores = {
        "flat tree": rounded(bracket_scores(test, [flat_tree(t.pos()) for t in test])),
        "right-branching tree": rounded(bracket_scores(test, [right_branching_tree(t.pos()) for t in test])),
        "PCFG, gold tags": {**rounded(bracket_scores(test, gold_trees)), "derived": gold_found},
        "PCFG, tagger's tags": {**rounded(bracket_scores(test, tagger_trees)), "derived": tagger_found},
    }
    record = {
        "task": "baselines for English constituency parsing on NLTK's 5% WSJ sample, split by file "
                "(the split of results/parsing/results.json)",
        "splits": {split: len(trees) for split, trees in treebank.items()},
        "dev_grid": grid, "chosen": {"horizontal": chosen["horizontal"], "vertical": chosen["vertical"],
                                     "by": "dev F1 with gold tags"},
        "tagger": {"model": "NLTK averaged perceptron, 5 passes over the training trees, seed 1",
                   "test_accuracy": round(tag_accuracy, 4)},
        "test": test_scores,
        "scoring": "labelled bracket P/R/F1 following evalb's COLLINS.prm (transformer.parsing.bracket_scores, "
                   "the scorer of results.json); all sentence lengths",
        "minutes": round((time.time() - started) / 60, 2),
    }
    write_record(results / "baselines.json", record)
    for name, scores in test_scores.items():
        print(f"test, {name}: F1 {scores['f1']:.2f}")


if __name__ == "__main__":
    main()
