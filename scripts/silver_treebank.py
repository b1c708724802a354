"""Table 4's semi-supervised row at our scale: English news sentences parsed by the book's PCFG.

    python scripts/silver_treebank.py        # about an hour on one CPU thread; resumes when killed

The paper's 92.7 comes from adding about 17M sentences that another parser had parsed. Here the other
parser is chapter 6.3's own PCFG (read from the training trees, tags from the perceptron tagger trained on
the same trees), and the sentences are the English sides of the WMT news sets beside the project, every set
but newstest2013 and newstest2014 (the translation chapters' dev and test), each sentence once, 3 to 25
tokens after Penn Treebank tokenisation.

Confidence, by a rule fixed before the parse: every sentence is parsed by the two grammars that scored best
on dev with gold tags (results/parsing/baselines.json: horizontal/vertical Markov orders 1/2 and 2/2), and
its agreement is the bracket F1 of one parse against the other. A sentence is kept when both grammars
derive a tree and the trees agree exactly (agreement 100). The same agreement is measured on the dev split
(tagger's tags) against the gold trees, so the record says how much more accurate the kept trees are.

Writes results/parsing-semi/silver.jsonl.gz (every parsed sentence: its source set, the chosen grammar's
tree on one line, whether each grammar derived a tree, the agreement) and silver.json (the rule, how many
sentences, how many kept, the dev check, minutes, hardware, date, commit, command). Work goes to
runs/silver-treebank/ in shards of SHARD sentences, each written whole, so a killed run continues.
"""
import argparse
import gzip
import json
import os
import sys
import time
from pathlib import Path

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")                # one thread: the CKY cells are small

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from transformer.corpora import data_dir  # noqa: E402
from transformer.data import atomic_file  # noqa: E402
from transformer.parsing import (PCFG, bracket_scores, brackets, pcfg_parse, read_treebank,  # noqa: E402
                                 silver_kept, train_tagger)
from transformer.runlog import write_record  # noqa: E402
from nltk import Tree  # noqa: E402

GRAMMARS = [(1, 2), (2, 2)]     # (horizontal, vertical): the two best on dev in baselines.json, best first
NEWS_SETS = ["news-test2008", "newssyscomb2009", "newstest2009", "newstest2010", "newstest2011",
             "newstest2012", "newstest2015", "newstest2016", "newstest2017", "newstest2018"]
MIN_TOKENS, MAX_TOKENS = 3, 25     # CKY time grows with the cube of the length: 25 keeps it near an hour
SHARD = 250
# The treebank escapes brackets, and a bracket inside a word would break the tree's own bracketing.
PTB_ESCAPES = {"(": "-LRB-", ")": "-RRB-", "[": "-LSB-", "]": "-RSB-", "{": "-LCB-", "}": "-RCB-"}


def ptb_tokens(sentence: str) -> list[str]:
    """A sentence split as the Penn Treebank splits it (n't, 's, `` and '' for quotes, brackets escaped)."""
    from nltk.tokenize import TreebankWordTokenizer
    return [PTB_ESCAPES.get(t, t) for t in TreebankWordTokenizer().tokenize(sentence)]


def news_sentences(folder: Path) -> list[tuple[str, list[str]]]:
    """(set name, tokens) for every distinct English news sentence within the length cap, in file order."""
    seen, kept = set(), []
    for name in NEWS_SETS:
        path = folder / f"{name}.en"
        if not path.is_file():
            raise FileNotFoundError(f"{path} is missing: the WMT news sets are read from the data folder "
                                    "(see the README's 'Data')")
        for line in path.read_text(encoding="utf-8").splitlines():
            tokens = ptb_tokens(line.strip())
            key = " ".join(tokens)
            if MIN_TOKENS <= len(tokens) <= MAX_TOKENS and key not in seen:
                seen.add(key)
                kept.append((name, tokens))
    return kept


def agreement(a, b) -> float:
    """Bracket F1 (in %) of one parse against another of the same words."""
    x, y = brackets(a), brackets(b)
    total = sum(x.values()) + sum(y.values())
    return 100.0 if total == 0 else 200 * sum((x & y).values()) / total


def parse_both(grammars, tagged):
    (first, ok_first), (second, ok_second) = (pcfg_parse(g, tagged) for g in grammars)
    return first, [ok_first, ok_second], round(agreement(first, second), 2)


def dev_check(grammars, tagger, dev) -> dict:
    """The rule on the dev split (tagger's tags): F1 of the kept trees against gold, and of the rest."""
    parsed = [parse_both(grammars, tagger.tag(t.leaves())) for t in dev]
    entries = [{"derived": d, "agreement": a} for _, d, a in parsed]
    keep = [silver_kept(e) for e in entries]
    part = {name: [i for i, k in enumerate(keep) if k == want] for name, want in (("kept", True),
                                                                                  ("dropped", False))}
    scores = {name: round(bracket_scores([dev[i] for i in idx], [parsed[i][0] for i in idx])["f1"], 2)
              if idx else None for name, idx in part.items()}
    return {"sentences": len(dev), "kept": len(part["kept"]),
            "f1_all": round(bracket_scores(dev, [p[0] for p in parsed])["f1"], 2),
            "f1_kept": scores["kept"], "f1_dropped": scores["dropped"]}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", default=str(ROOT / "results" / "parsing-semi"))
    parser.add_argument("--work", default=str(ROOT / "runs" / "silver-treebank"))
    parser.add_argument("--limit", type=int, help="parse only the first N sentences (a smoke test)")
    args = parser.parse_args(argv)
    if args.limit is not None and args.limit <= 0:
        parser.error("--limit must be positive")
    results, work = Path(args.results), Path(args.work)
    sentences = news_sentences(data_dir() / "wmt14-en-de")[:args.limit]
    treebank = read_treebank()
    work.mkdir(parents=True, exist_ok=True)
    marker = work / "sentences.json"
    fingerprint = {"sets": NEWS_SETS, "tokens": [MIN_TOKENS, MAX_TOKENS], "sentences": len(sentences),
                   "grammars": GRAMMARS, "shard": SHARD}
    if marker.exists() and json.loads(marker.read_text()) != fingerprint:
        sys.exit(f"error: {work} holds shards of another selection ({marker}); move it away or pass --work")
    with atomic_file(marker) as tmp:
        tmp.write_text(json.dumps(fingerprint))

    started = time.time()
    grammars = [PCFG(treebank["train"], h, v) for h, v in GRAMMARS]
    tagger = train_tagger(treebank["train"])
    shards = range(0, len(sentences), SHARD)
    from tqdm import tqdm
    for first in tqdm(shards, desc="silver shards", unit="shard", mininterval=30):
        path = work / f"shard-{first // SHARD:05d}.jsonl"
        if path.exists():
            continue
        shard_started, lines = time.time(), []
        for source, tokens in sentences[first:first + SHARD]:
            tree, derived, agree = parse_both(grammars, tagger.tag(tokens))
            lines.append(json.dumps({"set": source, "tree": tree.pformat(margin=10**9),
                                     "derived": derived, "agreement": agree}))
        header = json.dumps({"seconds": round(time.time() - shard_started, 2)})
        with atomic_file(path) as tmp:
            tmp.write_text("\n".join([header] + lines) + "\n", encoding="utf-8")

    entries, seconds = [], 0.0
    for first in shards:
        header, *lines = (work / f"shard-{first // SHARD:05d}.jsonl").read_text(encoding="utf-8").splitlines()
        seconds += json.loads(header)["seconds"]
        entries += map(json.loads, lines)
    check = dev_check(grammars, tagger, treebank["dev"])
    results.mkdir(parents=True, exist_ok=True)
    with atomic_file(results / "silver.jsonl.gz") as tmp:
        with gzip.GzipFile(tmp, "wb", mtime=0) as out:       # mtime 0: the same trees give the same bytes
            out.write("".join(json.dumps(e, ensure_ascii=False) + "\n" for e in entries).encode("utf-8"))
    n_kept = sum(map(kept, entries))
    record = {
        "task": "a silver treebank for the semi-supervised parser: English news sentences parsed by the "
                "book's PCFG (tagger's tags), kept where the two best grammars on dev agree",
        "sources": NEWS_SETS, "tokens": {"min": MIN_TOKENS, "max": MAX_TOKENS,
                                         "tokeniser": "NLTK TreebankWordTokenizer, brackets escaped"},
        "grammars": [{"horizontal": h, "vertical": v} for h, v in GRAMMARS],
        "rule": "kept when both grammars derive a tree and the two trees are identical (agreement F1 100)",
        "sentences": len(entries), "kept": n_kept,
        "kept_tokens": sum(len(Tree.fromstring(e["tree"]).leaves()) for e in entries if silver_kept(e)),
        "dev_check": check,
        "minutes": {"parsing, all starts": round(seconds / 60, 2),
                    "this start, dev check included": round((time.time() - started) / 60, 2)},
        "threads": 1,
        "limit": args.limit,
    }
    write_record(results / "silver.json", record)
    print(f"{len(entries)} sentences parsed, {n_kept} kept; dev F1 of kept trees {check['f1_kept']} "
          f"against {check['f1_all']} for all")


if __name__ == "__main__":
    main()
