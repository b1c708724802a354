"""Table 4's semi-supervised row at our scale: English sentences parsed by the book's PCFG.

    python scripts/silver_treebank.py                   # the first treebank: WMT news, about an hour
    python scripts/silver_treebank.py --treebank large  # at least 50,000 kept trees, hours; see below

Both resume when killed, at one CPU thread a process; `--worker 0/2` and `--worker 1/2` in two processes
share the large one's shards between two cores. The paper's 92.7 comes from adding about 17M sentences that
another parser had parsed. Here the other parser is chapter 6.3's own PCFG (read from the training trees),
and its confidence is the rule fixed before the first parse: every sentence is parsed by the two grammars
that scored best on dev with gold tags (results/parsing/baselines.json: horizontal/vertical Markov orders
1/2 and 2/2), and a sentence is kept when both derive a tree and the two trees are the same
(transformer.parsing.silver_kept). The same agreement is measured on the dev split against the gold trees,
so the record says how much more accurate the kept trees are than the rest.

The two treebanks (TREEBANKS below):
- "semi", results/parsing-semi: the English sides of the WMT news sets beside the project, every set but
  newstest2013 and newstest2014 (the translation chapters' dev and test), tags from the perceptron tagger
  trained on the same trees. Work goes to runs/silver-treebank/; silver.jsonl.gz holds every sentence.
- "large", results/silver-treebank: the plain English text beside the project (its README: none of it is in
  the treebank sample or the translation sets), in this order: Wall Street Journal sentences of other
  sections with the treebank's own tags, then news sentences, then the Brown corpus (both tagged by the
  tagger). Its shards (500 sentences each, gzip) are written into the results folder as they are parsed
  and committed, so a new checkout continues where the last one stopped; each shard names the commit and
  the teachers that made it. `--record` reads the shards there are and writes silver.json.

Every source is tokenised as the treebank is (TOKENS says how), each sentence once across sources, 3 to 25
tokens: CKY time grows with the cube of the length.
"""
import argparse
import gzip
import json
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from transformer.corpora import data_dir  # noqa: E402
from transformer.data import atomic_file  # noqa: E402
from transformer.parser_training import SHARD, read_shard  # noqa: E402
from transformer.parsing import (PCFG, bracket_scores, brackets, pcfg_parse, read_treebank,  # noqa: E402
                                 silver_kept, train_tagger)
from transformer.runlog import CODE_AT_START, add_uncommitted_flag, refuse_uncommitted, write_record  # noqa: E402
from nltk import Tree  # noqa: E402
import torch  # noqa: E402

GRAMMARS = [(1, 2), (2, 2)]     # (horizontal, vertical): the two best on dev in baselines.json, best first
TEACHERS = [f"PCFG h{h} v{v}" for h, v in GRAMMARS]
NEWS_SETS = ["news-test2008", "newssyscomb2009", "newstest2009", "newstest2010", "newstest2011",
             "newstest2012", "newstest2015", "newstest2016", "newstest2017", "newstest2018"]
MIN_TOKENS, MAX_TOKENS = 3, 25
# The treebank escapes brackets, and a bracket inside a word would break the tree's own bracketing.
PTB_ESCAPES = {"(": "-LRB-", ")": "-RRB-", "[": "-LSB-", "]": "-RSB-", "{": "-LCB-", "}": "-RCB-"}
# Brown keeps clitics on their word; the treebank splits them off (can't -> ca n't).
CLITIC = re.compile(r"(?i)^(.+?)(n't|'s|'re|'ve|'ll|'d|'m)$")
TOKENS = {"wsj": "the treebank's own tokens and tags (word/TAG), brackets escaped in words and tags",
          "news": "NLTK TreebankWordTokenizer, brackets escaped",
          "brown": "Brown's own tokens (its quotes are the treebank's `` and ''), clitics split off as "
                   "the treebank does (n't 's 're 've 'll 'd 'm), brackets escaped"}


def ptb_tokens(sentence: str) -> list[str]:
    """A sentence split as the Penn Treebank splits it (n't, 's, `` and '' for quotes, brackets escaped)."""
    from nltk.tokenize import TreebankWordTokenizer
    return [PTB_ESCAPES.get(t, t) for t in TreebankWordTokenizer().tokenize(sentence)]


def brown_tokens(line: str) -> list[str]:
    out = []
    for token in line.split():
        match = CLITIC.match(token)
        out += [match[1], match[2]] if match else [token]
    return [PTB_ESCAPES.get(t, t) for t in out]


def wsj_tagged(line: str) -> list[tuple[str, str]]:
    pairs = [token.rsplit("/", 1) for token in line.split()]
    return [(PTB_ESCAPES.get(w, w), PTB_ESCAPES.get(t, t)) for w, t in pairs]


def read_text(path: Path) -> list[str]:
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: the silver text is read from the data folder "
                                "(see the README's 'Data')")
    return path.read_text(encoding="utf-8").splitlines()


def news_sets(folder: Path) -> list[tuple[str, list[tuple[str, str | None]]]]:
    return [(name, [(t, None) for t in ptb_tokens(line.strip())])
            for name in NEWS_SETS for line in read_text(folder / "wmt14-en-de" / f"{name}.en")]


def english_text(folder: Path) -> list[tuple[str, list[tuple[str, str | None]]]]:
    text = folder / "english-text"
    return ([("wsj", wsj_tagged(line)) for part in ("train", "test")
             for line in read_text(text / f"wsj-conll2000-{part}.tagged")]
            + [("news", [(t, None) for t in ptb_tokens(line.strip())])
               for line in read_text(text / "news.en")]
            + [("brown", [(t, None) for t in brown_tokens(line)]) for line in read_text(text / "brown.tok")])


def distinct(sentences):
    """(source, [(word, gold tag or None)]) for each distinct sentence within the length cap, in order."""
    seen, kept = set(), []
    for source, tagged in sentences:
        key = " ".join(w for w, _ in tagged)
        if MIN_TOKENS <= len(tagged) <= MAX_TOKENS and key not in seen:
            seen.add(key)
            kept.append((source, tagged))
    return kept


@dataclass(frozen=True)
class Treebank:
    name: str
    results: str        # relative to the repository
    shards: str         # where the shards go, relative to the repository
    shard: int          # sentences a shard
    read: object        # data folder -> [(source, tagged)]
    task: str
    # True: shards gzip'd in the repository, each naming its code; the record counts per source and checks
    # with gold tags too. False: the first treebank's layout, kept so that its record reads the same.
    committed: bool = True


TREEBANKS = {t.name: t for t in (
    Treebank("semi", "results/parsing-semi", "runs/silver-treebank", 250, news_sets,
             "a silver treebank for the semi-supervised parser: English news sentences parsed by the "
             "book's PCFG (tagger's tags), kept where the two best grammars on dev agree", committed=False),
    Treebank("large", "results/silver-treebank", "results/silver-treebank/shards", 500, english_text,
             "a silver treebank of at least 50,000 kept trees for the semi-supervised parser's learning "
             "curve: WSJ sentences (gold tags), news and Brown sentences (tagger's tags) parsed by the book's "
             "PCFG, kept where the two best grammars on dev agree"),
)}


def agreement(a, b) -> float:
    """Bracket F1 (in %) of one parse against another of the same words."""
    x, y = brackets(a), brackets(b)
    total = sum(x.values()) + sum(y.values())
    return 100.0 if total == 0 else 200 * sum((x & y).values()) / total


def parse_both(grammars, tagged):
    (first, ok_first), (second, ok_second) = (pcfg_parse(g, tagged) for g in grammars)
    return first, [ok_first, ok_second], round(agreement(first, second), 2)


def dev_check(grammars, tag, dev) -> dict:
    """The rule on the dev split (tags from `tag`): F1 of the kept trees against gold, and of the rest."""
    parsed = [parse_both(grammars, tag(t)) for t in dev]
    entries = [{"derived": d, "agreement": a} for _, d, a in parsed]
    keep = [silver_kept(e) for e in entries]
    part = {name: [i for i, k in enumerate(keep) if k == want] for name, want in (("kept", True),
                                                                                  ("dropped", False))}
    scores = {name: round(bracket_scores([dev[i] for i in idx], [parsed[i][0] for i in idx])["f1"], 2)
              if idx else None for name, idx in part.items()}
    return {"sentences": len(dev), "kept": len(part["kept"]),
            "f1_all": round(bracket_scores(dev, [p[0] for p in parsed])["f1"], 2),
            "f1_kept": scores["kept"], "f1_dropped": scores["dropped"]}


def shard_path(work: Path, treebank: Treebank, index: int) -> Path:
    return work / (SHARD.format(index) + (".gz" if treebank.committed else ""))


def write_shard(path: Path, header: dict, lines: list[str]) -> None:
    text = "\n".join([json.dumps(header)] + lines) + "\n"
    with atomic_file(path) as tmp:
        if path.suffix == ".gz":
            with gzip.GzipFile(tmp, "wb", mtime=0) as out:    # mtime 0: the same trees, the same bytes
                out.write(text.encode("utf-8"))
        else:
            Path(tmp).write_text(text, encoding="utf-8")


def parse_shards(treebank, sentences, work, grammars, tagger, limit_shards=None, worker=(0, 1)):
    """Parse every shard not yet on disk, each written whole; worker (i, n) takes every n-th from the i-th."""
    from tqdm import tqdm
    starts = range(0, len(sentences), treebank.shard)
    todo = [s for s in starts if not shard_path(work, treebank, s // treebank.shard).exists()
            and (s // treebank.shard) % worker[1] == worker[0]]
    for first in tqdm(todo[:limit_shards], desc=f"silver shards ({len(starts) - len(todo)} done before)",
                      unit="shard", mininterval=30):
        shard_started, lines, sources = time.time(), [], {}
        for source, tagged in sentences[first:first + treebank.shard]:
            gold = tagged[0][1] is not None
            tree, derived, agree = parse_both(grammars, tagged if gold else tagger.tag([w for w, _ in tagged]))
            sources[source] = sources.get(source, 0) + 1
            lines.append(json.dumps({"set": source, "tree": tree.pformat(margin=10**9),
                                     "derived": derived, "agreement": agree}))
        header = {"seconds": round(time.time() - shard_started, 2)}
        if treebank.committed:
            header.update(first=first, sources=sources, teachers=TEACHERS, **CODE_AT_START)
        write_shard(shard_path(work, treebank, first // treebank.shard), header, lines)
    return starts


def summary(treebank, starts, work) -> tuple[list[dict], dict]:
    """Every parsed entry of the shards on disk, in order, and per source: read, kept, minutes."""
    entries, seconds, per_source = [], 0.0, {}
    for first in starts:
        path = shard_path(work, treebank, first // treebank.shard)
        if not path.exists():
            break                                   # the shards grow in order; the rest are to come
        header, rows = read_shard(path)
        seconds += header["seconds"]
        entries += rows
        for row in rows:
            counts = per_source.setdefault(row["set"], {"sentences": 0, "kept": 0})
            counts["sentences"] += 1
            counts["kept"] += silver_kept(row)
    return entries, {"seconds": seconds, "per_source": per_source}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--treebank", choices=sorted(TREEBANKS), default="semi")
    parser.add_argument("--results", help="the record's folder (default: the treebank's)")
    parser.add_argument("--work", help="the shards' folder (default: the treebank's)")
    parser.add_argument("--limit", type=int, help="parse only the first N sentences (a smoke test)")
    parser.add_argument("--shards", type=int, help="parse at most N more shards, then stop")
    parser.add_argument("--worker", default="0/1", metavar="I/N",
                        help="parse only every N-th shard, from the I-th: N processes of 0/N ... N-1/N share "
                             "the parse without a shard parsed twice (each at one thread)")
    parser.add_argument("--record", action="store_true",
                        help="write the record from the shards there are, parsing nothing")
    add_uncommitted_flag(parser)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)                        # one thread a process: the CKY cells are small
    for name in ("limit", "shards"):
        if getattr(args, name) is not None and getattr(args, name) <= 0:
            parser.error(f"--{name} must be positive")
    worker = tuple(int(x) for x in args.worker.split("/") if x.isdigit())
    if len(worker) != 2 or args.worker.count("/") != 1 or not worker[0] < worker[1]:
        parser.error(f"--worker must be I/N with 0 <= I < N, not {args.worker!r}")
    treebank = TREEBANKS[args.treebank]
    results = Path(args.results or ROOT / treebank.results)
    work = Path(args.work or ROOT / treebank.shards)
    refuse_uncommitted(results, args.uncommitted)
    sentences = distinct(treebank.read(data_dir()))[:args.limit]
    trees = read_treebank()
    work.mkdir(parents=True, exist_ok=True)
    marker = work / "sentences.json"
    fingerprint = {"sources": sorted({s for s, _ in sentences}), "tokens": [MIN_TOKENS, MAX_TOKENS],
                   "sentences": len(sentences), "grammars": GRAMMARS, "shard": treebank.shard}
    if not treebank.committed:                     # as the first treebank's shards were marked
        fingerprint = {"sets": NEWS_SETS, **{k: v for k, v in fingerprint.items() if k != "sources"}}
    fingerprint = json.loads(json.dumps(fingerprint))     # as it reads back: lists, not tuples
    if marker.exists() and json.loads(marker.read_text()) != fingerprint:
        sys.exit(f"error: {work} holds shards of another selection ({marker}); move it away or pass --work")
    with atomic_file(marker) as tmp:
        tmp.write_text(json.dumps(fingerprint))

    started = time.time()
    grammars = [PCFG(trees["train"], h, v) for h, v in GRAMMARS]
    tagger = train_tagger(trees["train"])
    starts = range(0, len(sentences), treebank.shard)
    if not args.record:
        parse_shards(treebank, sentences, work, grammars, tagger, args.shards, worker)
        if treebank.committed:
            return
    entries, done = summary(treebank, starts, work)
    checks = {"tagger": dev_check(grammars, lambda t: tagger.tag(t.leaves()), trees["dev"])}
    if treebank.committed:
        checks["gold tags"] = dev_check(grammars, lambda t: t.pos(), trees["dev"])
    results.mkdir(parents=True, exist_ok=True)
    if not treebank.committed:
        with atomic_file(results / "silver.jsonl.gz") as tmp:
            with gzip.GzipFile(tmp, "wb", mtime=0) as out:
                out.write("".join(json.dumps(e, ensure_ascii=False) + "\n" for e in entries).encode("utf-8"))
    n_kept = sum(map(silver_kept, entries))
    record = {
        "task": treebank.task,
        "sources": NEWS_SETS if not treebank.committed else list(TOKENS),
        "tokens": {"min": MIN_TOKENS, "max": MAX_TOKENS,
                   "tokeniser": TOKENS["news"] if not treebank.committed else TOKENS},
        "grammars": [{"horizontal": h, "vertical": v} for h, v in GRAMMARS],
        "rule": "kept when both grammars derive a tree and the two trees are identical (agreement F1 100)",
        "sentences": len(entries), "kept": n_kept,
        "kept_tokens": sum(len(Tree.fromstring(e["tree"]).leaves()) for e in entries if silver_kept(e)),
        "dev_check": checks["tagger"],
        "minutes": {"parsing, all starts": round(done["seconds"] / 60, 2),
                    "this start, dev check included": round((time.time() - started) / 60, 2)},
        "threads": 1,
        "limit": args.limit,
    }
    if treebank.committed:
        record.update(dev_check_gold_tags=checks["gold tags"], per_source=done["per_source"],
                      selected=len(sentences), shards={"done": len(entries) and -(-len(entries) // treebank.shard),
                                                      "all": len(starts)})
    write_record(results / "silver.json", record)
    print(f"{len(entries)} sentences parsed, {n_kept} kept; dev F1 of kept trees {checks['tagger']['f1_kept']} "
          f"against {checks['tagger']['f1_all']} for all")


if __name__ == "__main__":
    main()
