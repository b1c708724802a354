"""Chapter 6.3's result: a Transformer parser trained on NLTK's WSJ sample, scored evalb-style.

    python scripts/parsing.py        # prepares the corpus (runs/parsing-corpus), trains runs/parsing
                                     # round by round while dev F1 improves, decodes test, scores
    python scripts/parsing.py --from-pilot   # the same, its first rounds those of the pilot's chosen
                                             # setting (below), which the profile must hold
    python scripts/parsing.py --from-pilot prenorm-f0.25-p0.1   # a pilot setting the profile does
                                     # not hold (pre-norm), carried on the same way as a labelled
                                     # variant: runs/parsing-SETTING, results/parsing-SETTING
    python scripts/parsing.py --share-embeddings   # the same with the paper's one embedding table
                                     # for source, target and output (runs/parsing-tied, results/parsing-tied)

The target side is the linearised trees, each bracket and XX one whole vocabulary entry
(the profile's whole_target_words), and decoding can only write well-formed trees with one XX per
word (transformer.parsing.TreeConstraint). Training goes in rounds (transformer.rounds, the profile's
round_steps: about an epoch); after each round the last checkpoint parses the dev split greedily and is
scored; training stops when dev F1 has not improved for the profile's patience in rounds (or after
--max-minutes of training). The round
with the best dev F1 is the model (kept in runs/parsing-select/best.pt): the choice is made on dev
only. Killed at any point, the command resumes where it stopped.

Test is then decoded as the paper did for parsing (beam 21, alpha 0.3, input length + 300 tokens)
and also greedily. Diagnostics: dev loss with the sources shuffled across sentences, and whether the
encoder tells words apart (how alike the source embeddings are, how much its output varies). Writes
results/parsing/: results.json (dev curve, scores, diagnostics, hardware, date, commit, command),
test.pred.mrg and dev.pred.mrg (one predicted tree per line, gold part-of-speech tags put back; dev by
the chosen model, greedily, as it was chosen), test.raw.txt (the decoder's output) and the training logs.

    python scripts/parsing.py --pilot [SETTING ...]   # the rate and dropout pilot (chapter 6.3)

The pilot trains the paper's post-norm parser at three peak rates (lr_factor 0.1, 0.25, 0.4) and two
dropout rates (P_drop 0.1, 0.2), and pre-norm beside it as a labelled variant (not the paper's
wiring), each for PILOT_ROUNDS rounds on the same schedule, dev only; each setting writes
results/parsing-pilot/SETTING.json when its rounds are done, and once every post-norm setting has one,
results/parsing-pilot/results.json applies the rule fixed before the pilot ran (PILOT_RULE). Settings
may be trained by separate commands side by side (one thread each); killed, each resumes.

    python scripts/parsing.py --pilot bpe-source      # the source vocabulary pilot, one command
    python scripts/parsing.py --pilot word-source     # a setting, side by side

The source vocabulary pilot trains the profile's parser with its BPE source (pieces) and with a word
source (one entry per word, the rarest the unknown token), each PILOT_ROUNDS rounds; records in
results/parsing-pilot-vocab/, the choice by VOCAB_RULE, fixed before the pilot ran.

    python scripts/parsing.py --pilot attn0.1         # the attention dropout pilot, at the vocabulary
    python scripts/parsing.py --pilot attn0.2         # pilot's choice (whose own run is the rate 0)
    python scripts/parsing.py --from-pilot SETTING    # the final run from any pilot's run of SETTING

    python scripts/parsing.py --pilot semi-mixed      # Table 4's second row: gold and silver trees
    python scripts/parsing.py --pilot semi-gold3      # (results/parsing-semi), gold once or three times
    python scripts/parsing.py --semi                  # its final run, from the mix the pilot chose

Records in results/parsing-pilot-attn/, the choice by ATTN_RULE; results/parsing-pilot-semi/ by SEMI_RULE,
and the semi-supervised row in results/parsing-semi/. Where the profile averages checkpoints
(average_last > 1), the final run decodes test with the mean of its last checkpoints or with its best
round alone, whichever parses dev better (AVERAGE_RULE).

    python scripts/parsing.py --set model.pointer_id=XX   # a labelled variant: the WSJ-only run with
                                     # changes (transformer.train's --set), in runs/parsing-NAME and
                                     # results/parsing-NAME
    python scripts/parsing.py --set corpus=ptb-semi model.pointer_id=XX   # the same change to the
                                     # semi-supervised run (the WSJ-only run on the chosen mix)

A variant is trained from its first step under the WSJ-only run's stop and averaging rules (VARIANT_RULE);
model.pointer_id may name a target symbol: the decoder told which word it is on (chapter 3.6).
"""
import argparse
import gzip
import json
import random
import shutil
import sys
import time
from collections import Counter
from dataclasses import astuple
from pathlib import Path

import torch
from nltk import Tree

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from transformer.corpora import CORPORA, load_split  # noqa: E402
from transformer.distributed import Runtime  # noqa: E402
from transformer.data import EOS  # noqa: E402
from transformer.decode import translate  # noqa: E402
from transformer.evaluate import COLLAPSED  # noqa: E402
from transformer.optim import rate  # noqa: E402
from transformer.parsing import (TreeConstraint, bracket_scores, parse_output, prepare_ptb,  # noqa: E402
                                 read_treebank, silver_kept, with_tags, write_trees)
from transformer.profiles import get_profile  # noqa: E402
from transformer.rounds import Setting, budget, chosen_setting, dev_decides, pilot, train_in_rounds  # noqa: E402
from transformer.run import (BEST, CURVE, DEV_LOG, LOCK, TRAIN_LOG, keep_record, load_model, prepare_data,  # noqa: E402
                           run_lock)
from transformer.runlog import write_record  # noqa: E402
from transformer.step import pairs_loss  # noqa: E402

# The paper's parser had 4 layers of d_model 1024 and a 16K vocabulary; here 4 layers of 128 and 4000
# entries (the trees' own symbols among them, whole), for 3,400 training trees on a CPU. The source and
# the target use disjoint entries, so they get separate embedding tables (share_embeddings False): with
# the paper's sharing, the output layer pushes every source piece the same way (chapter 6.3 measures it).
# transformer/profiles.py: 4 layers of 128, separate tables, at the rate and P_drop the pilot chose;
# and the same with the paper's one table for source, target and output layer
PROFILE, SHARED_PROFILE = get_profile("ptb-parse"), get_profile("ptb-parse-shared")
BEAM, ALPHA, MAX_EXTRA = 21, 0.3, 300     # the paper's decoding settings for parsing


def parse(model, vocab, trees, beam_size, constrained=True):
    """The decoder's raw outputs for the sentences of `trees`."""
    sentences = [" ".join(t.leaves()) for t in trees]
    constrain = TreeConstraint(vocab, MAX_EXTRA).for_sentences if constrained else None
    return translate(model, vocab, sentences, beam_size=beam_size, alpha=ALPHA, max_extra=MAX_EXTRA,
                     batch_tokens=100_000, progress=False, constrain=constrain)


def score(outputs, gold):
    """(bracket scores, predicted trees with the gold tags, how many were well-formed/repaired/empty)."""
    predicted, status = [], Counter()
    for out, g in zip(outputs, gold):
        tree, kind = parse_output(out.split(), g.leaves())
        status[kind] += 1
        predicted.append(None if tree is None else with_tags(tree, [tag for _, tag in g.pos()]))
    return bracket_scores(gold, predicted), predicted, dict(status)


def dev_score(trees, pairs):
    """score(model, vocab) for train_in_rounds: greedy, constrained F1 on `trees`, and
    whether the parser reads its sentence (source_loss on the first 60 of `pairs`)."""
    def score_fn(model, vocab):
        started = time.time()
        scores, _, status = score(parse(model, vocab, trees, 1), trees)
        return {"dev_f1": round(scores["f1"], 3), "dev_status": status,
                "dev_parse_seconds": round(time.time() - started, 1),
                "dev_nll": source_loss(model, vocab, pairs[:60])}
    return score_fn


def source_loss(model, vocab, pairs, seed=0):
    """Loss per target token with each tree paired with its own sentence, and with another's: equal,
    the parser does not read its input."""
    order = list(range(len(pairs)))
    random.Random(seed).shuffle(order)
    shuffled = [(pairs[order[i]][0], tgt) for i, (_, tgt) in enumerate(pairs)]
    return {name: round(pairs_loss(model, vocab, p, PROFILE.max_tokens)["dev_nll"], 4)
            for name, p in (("own_sentence", pairs), ("another_sentence", shuffled))}


# The pilot's grid (chapter 6.3): the peak rate and dropout that chapter 6.2 found decide whether a
# post-norm encoder leaves its collapse; pre-norm as a labelled variant, tried and shown, never chosen
PILOT = {s.name: s for s in [
    *(Setting.of({"lr_factor": f, "model.P_drop": p}, f"f{f}-p{p}") for p in (0.1, 0.2) for f in (0.25, 0.1, 0.4)),
    Setting.of({"lr_factor": 0.25, "model.P_drop": 0.1, "model.norm_first": True}, "prenorm-f0.25-p0.1")]}
VARIANTS = ("prenorm-f0.25-p0.1",)
PILOT_ROUNDS = 20      # 2,000 steps: the probe's post-norm parser began reading between 1,000 and 1,500
PILOT_RULE = (f"among the post-norm settings, the one with the highest greedy dev F1 at a round whose "
              f"encoder similarity is below {COLLAPSED} (the encoder tells positions apart); equal F1, the "
              f"lower dev perplexity at that round; pre-norm is shown, never chosen; no setting below "
              f"{COLLAPSED} within {PILOT_ROUNDS} rounds: none is chosen")


ROUND_KEYS = ("round", "step", "dev_f1", "dev_ppl", "encoder_similarity")


def pilot_choice(records):
    """PILOT_RULE applied to the records of the paper's settings ({setting: record}): {"setting": name,
    and its round} or None."""
    candidates = [(p["dev_f1"], -p["dev_ppl"], name, p) for name, r in records.items()
                  for p in r["dev_curve"] if p["encoder_similarity"] < COLLAPSED]
    if not candidates:
        return None
    _, _, name, point = max(candidates, key=lambda c: c[:2])
    return {"setting": name, **{k: point[k] for k in ROUND_KEYS}}


# The second pilot (chapter 6.3, the paper's model trained to the end): the output writes one XX per
# word, but a BPE source splits words into pieces the decoder cannot count; the paper's parser read
# one token per word. Both source vocabularies at the rate pilot's choice, the same 20 rounds
VOCAB_PILOT = {s.name: s for s in [Setting.of({"vocab_model": v}, f"{v}-source") for v in ("bpe", "word")]}
VOCAB_LAST = 5         # one round's greedy dev F1 moves about 1.6 points; the last five are averaged
VOCAB_RULE = (f"of the two source vocabularies, the one with the higher mean greedy dev F1 over its last "
              f"{VOCAB_LAST} of {PILOT_ROUNDS} rounds; within 0.1 F1 of each other, the one with the lower mean "
              f"dev perplexity over those rounds (the targets are the same tokens under both)")


def last_rounds_choice(records):
    """The rule of the vocabulary, attention dropout and semi-supervised pilots (VOCAB_RULE, ATTN_RULE,
    SEMI_RULE) applied to {setting: record}: {"setting": name, its means, the rounds averaged}."""
    def means(record):
        last = record["dev_curve"][-VOCAB_LAST:]
        return {"mean_dev_f1": round(sum(p["dev_f1"] for p in last) / len(last), 3),
                "mean_dev_ppl": round(sum(p["dev_ppl"] for p in last) / len(last), 4),
                "rounds": [p["round"] for p in last]}
    scored = {name: means(r) for name, r in records.items()}
    top = max(m["mean_dev_f1"] for m in scored.values())
    name = min((n for n, m in scored.items() if m["mean_dev_f1"] >= top - 0.1),
               key=lambda n: scored[n]["mean_dev_ppl"])
    return {"setting": name, **scored[name], "all": scored}


# The third pilot: attention dropout (the paper's released parsing setup dropped 0.2 of the attention
# weights, the model's attn_drop) at the vocabulary pilot's choice. That choice's own run is the rate
# 0: the rule reads its record beside these two, and it is not trained again
ATTN_RATES = (0.1, 0.2)
ATTN_NAMES = {f"attn{a}": a for a in ATTN_RATES}
ATTN_RULE = (f"of the vocabulary pilot's chosen run (attention dropout 0) and the same setting with "
             f"attention dropout {' and '.join(map(str, ATTN_RATES))}, the one with the higher mean greedy dev "
             f"F1 over its last {VOCAB_LAST} of {PILOT_ROUNDS} rounds; within 0.1 F1 of each other, the lower "
             f"mean dev perplexity over those rounds")


# The fourth pilot, Table 4's second row at our scale: the same parser trained on the gold trees and the
# silver ones (scripts/silver_treebank.py), gold once or three times in the mix; dev and test are gold
SEMI_PILOT = {s.name: s for s in [Setting.of({"corpus": c}, name)
                                  for c, name in (("ptb-semi", "semi-mixed"), ("ptb-semi-gold3", "semi-gold3"))]}
SEMI_RULE = (f"of the two mixes of gold and silver trees, the one with the higher mean greedy dev F1 over its "
             f"last {VOCAB_LAST} of {PILOT_ROUNDS} rounds; within 0.1 F1 of each other, the lower mean dev "
             f"perplexity over those rounds (dev is the same gold trees under both)")
SILVER = ROOT / "results" / "parsing-semi" / "silver.jsonl.gz"


def read_silver(path):
    """The silver treebank's kept trees: both grammars derived a tree, and the same one (its record's rule)."""
    try:
        with gzip.open(path, "rt", encoding="utf-8") as f:
            rows = [json.loads(line) for line in f]
        kept = [Tree.fromstring(r["tree"]) for r in rows if silver_kept(r)]
        expected = json.loads(Path(path).with_name("silver.json").read_text())["kept"]
    except (OSError, EOFError, ValueError, KeyError) as err:
        sys.exit(f"{path}: the silver treebank cannot be read ({err}); make it with "
                 f"python scripts/silver_treebank.py")
    if len(kept) != expected:
        sys.exit(f"{path}: {len(kept)} kept trees, but its record says {expected}; make it again with "
                 f"python scripts/silver_treebank.py")
    return kept


# A labelled variant (--set) answers a question about the paper's model, not a choice among settings: no
# pilot, so nothing is chosen but the round, as for the WSJ-only run
VARIANT_RULE = ("the WSJ-only run's profile with the variant's changes, trained from its first step; the round by the "
                "same smoothed dev F1 and patience, test decoded by AVERAGE_RULE; compared with the WSJ-only run on "
                "the same test sentences by a paired bootstrap (transformer.parsing.f1_difference)")


def symbolic(changes):
    """The target symbol (XX) that the --set `changes` name as model.pointer_id, or None."""
    symbol = changes.changes.get("model.pointer_id")
    return symbol if isinstance(symbol, str) else None


def with_symbol_ids(changes, profile, run, data_root):
    """The variant's `profile` with the model.pointer_id that `changes` name as a target symbol (XX) set to the
    symbol's id in the run's vocabulary, which is made first if the run has none (the same corpus gives the
    same vocabulary)."""
    symbol = symbolic(changes)
    if symbol is None:
        return profile
    vocab, _, _ = prepare_data(profile, run, Runtime(), data_root, print)
    piece = "\u2581" + symbol              # how the vocabulary keeps a whole tree symbol
    token = vocab.sp.piece_to_id(piece)
    if vocab.sp.id_to_piece(token) != piece:
        sys.exit(f"--set model.pointer_id={symbol}: {symbol} is not a whole symbol of the parser's vocabulary")
    return Setting.of({"model.pointer_id": token}).apply(profile)


def pilot_folder(base, name):
    """Where the pilot `name` keeps its runs or records, beside the rate pilot's `base` folder."""
    return base.with_name(f"{base.name}-{name}") if name else base


def vocab_chosen(results):
    """The vocabulary pilot's chosen setting and its record, read from the rate pilot's `results`."""
    folder = pilot_folder(results, "vocab")
    try:
        setting = chosen_setting(folder, list(VOCAB_PILOT.values()))
    except ValueError as err:
        sys.exit(f"the attention dropout pilot starts from the vocabulary pilot's choice: {err}")
    return setting, json.loads((folder / f"{setting.name}.json").read_text())


def pilots(results):
    """Each pilot by name: (settings, rule, choice, variants), given the rate pilot's `results` folder."""
    def attention():
        base, record = vocab_chosen(results)
        settings = {name: Setting.of(base.changes | {"model.attn_drop": a}, name) for name, a in ATTN_NAMES.items()}
        return settings, ATTN_RULE, lambda records: last_rounds_choice({base.name: record, **records}), ()
    return {"": lambda: (PILOT, PILOT_RULE, pilot_choice, VARIANTS),
            "vocab": lambda: (VOCAB_PILOT, VOCAB_RULE, last_rounds_choice, ()), "attn": attention,
            "semi": lambda: (SEMI_PILOT, SEMI_RULE, last_rounds_choice, ())}


PILOT_SETTINGS = {"": lambda: list(PILOT), "vocab": lambda: list(VOCAB_PILOT),
                  "attn": lambda: list(ATTN_NAMES), "semi": lambda: list(SEMI_PILOT)}


def pilot_of(setting):
    """The name of the pilot whose grid holds `setting`."""
    return next(name for name, names in PILOT_SETTINGS.items() if setting in names())


def pilot_setting(setting, results):
    """The Setting named `setting`, of whichever pilot holds it."""
    return pilots(results)[pilot_of(setting)]()[0][setting]


def pilot_profile(setting, results=None):
    return pilot_setting(setting, results).apply(PROFILE)


def run_pilot(names, treebank, data_root, run_root, results):
    """A pilot (transformer.rounds.pilot) of PILOTS: the settings `names` (by default the rate pilot's)
    trained PILOT_ROUNDS rounds each (dev only), each with its record; the choice once every setting but
    its variants has one. Runs in run_root[-NAME]/SETTING, records in results[-NAME]."""
    which = {pilot_of(n) for n in names or PILOT}
    if len(which) > 1:
        sys.exit(f"--pilot: {', '.join(names)} belong to different pilots; name the settings of one")
    which = which.pop()
    settings, rule, choose, variants = pilots(results)[which]()
    run_root, results = pilot_folder(run_root, which), pilot_folder(results, which)
    dev_pairs = load_split("ptb", "dev", data_root)

    def trial(setting):
        profile, run = setting.apply(PROFILE), run_root / setting.name
        select = run.with_name(setting.name + "-select")
        curve, best, stopped = astuple(train_in_rounds(
            profile, run, profile.round_steps, dev_score(treebank["dev"], dev_pairs),
            [budget(rounds=PILOT_ROUNDS)], key="dev_f1", best_path=select / BEST, curve_path=select / CURVE,
            data_root=data_root))
        return {"lr_factor": profile.lr_factor, "model": profile.model, "vocab_model": profile.vocab_model,
                "corpus": profile.corpus,
                "peak_rate": rate(profile.warmup_steps, profile.model["d_model"], profile.warmup_steps,
                                  profile.lr_factor),
                "rounds": PILOT_ROUNDS, "round_steps": profile.round_steps, "stopped_by": stopped,
                "best": {k: best[k] for k in ROUND_KEYS}, "dev_curve": curve,
                "command": f"python scripts/parsing.py --pilot {setting.name}"}

    chosen = pilot(list(settings.values()), trial, choose, rule, results, names or list(settings), variants)
    waiting = [s for s in settings if s not in variants and not (results / f"{s}.json").exists()]
    print(f"pilot: the choice waits for {', '.join(waiting)}" if waiting
          else f"pilot chose {chosen and chosen['setting']}")


@torch.no_grad()
def encoder_diagnostics(model, vocab, sentences):
    """Whether the encoder tells words apart: the mean cosine between the embeddings of the distinct source
    pieces of `sentences`, and how much the encoder's output varies across the positions of a sentence
    (standard deviation over positions, averaged over features and sentences)."""
    ids = sorted({i for s in sentences for i in vocab.encode(s)})
    table = torch.nn.functional.normalize(model.src_embed.lut.weight[ids], dim=-1)
    cosine = table @ table.T
    mean_cosine = (cosine.sum() - len(ids)) / (len(ids) ** 2 - len(ids))
    spread = [model.encode(torch.tensor([vocab.encode(s) + [EOS]]))[0].std(dim=0).mean().item()
              for s in sentences]
    return {"source_pieces": len(ids), "mean_cosine_of_source_embeddings": round(mean_cosine.item(), 4),
            "encoder_output_spread_over_positions": round(sum(spread) / len(spread), 6)}


def start_from_pilot(profile, run, select_dir, pilot_runs, pilot_results, setting=None):
    """Seed `run` (and its selection) with the pilot's run of `setting` (default: the setting the pilot
    chose), so that the pilot's rounds are the run's first: the same profile, seed and schedule would
    train them again step for step. Refused unless `profile` is that setting. Returns the setting."""
    if setting is None:
        try:
            chosen = chosen_setting(pilot_results, list(PILOT.values()))
        except ValueError as err:
            sys.exit(f"--from-pilot: {err}; run python scripts/parsing.py --pilot first")
        if chosen is None:
            sys.exit(f"--from-pilot: the pilot chose no setting ({pilot_results / 'results.json'}); there is "
                     f"no run to begin with")
        setting = chosen.name
    path = pilot_results / f"{setting}.json"
    if not path.exists():
        sys.exit(f"--from-pilot: {path} does not exist; run python scripts/parsing.py --pilot {setting} first")
    trained = json.loads(path.read_text())
    # records made before the vocabulary pilot read BPE sources of gold trees alone
    held = (trained["lr_factor"], trained["model"], trained.get("vocab_model", "bpe"), trained.get("corpus", "ptb"))
    wanted = (profile.lr_factor, profile.model, profile.vocab_model, profile.corpus)
    if held != wanted:
        fields = "lr_factor, model, vocab_model, corpus"
        sys.exit(f"--from-pilot: the pilot's run of {setting} has {fields} {held}, not the profile's {wanted}; "
                 f"give the profile the chosen setting first")
    if not run.exists():
        with run_lock(pilot_runs / setting):
            shutil.copytree(pilot_runs / setting, run, ignore=shutil.ignore_patterns(LOCK))
            shutil.copytree(pilot_runs / f"{setting}-select", select_dir)
    return setting


AVERAGE_RULE = ("the mean of the run's last average_last checkpoints (the paper averaged its last checkpoints) "
                "against the best round alone: the higher greedy dev F1; equal, the best round")


def choose_average(profile, run, select_dir, dev_trees):
    """The model to decode test with, by AVERAGE_RULE where the profile averages checkpoints, else the
    best round's: (model, vocab, its greedy dev score() of `dev_trees`, the record of the choice or None)."""
    model, vocab, _ = load_model(select_dir / BEST)
    if profile.average_last == 1:
        return model, vocab, score(parse(model, vocab, dev_trees, 1), dev_trees), None
    averaged, _, files = load_model(run)       # the last average_last, or as many as the run has
    dev = {name: (m, score(parse(m, vocab, dev_trees, 1), dev_trees))
           for name, m in (("best round", model), ("averaged", averaged))}
    f1 = {name: round(scored[0]["f1"], 3) for name, (_, scored) in dev.items()}
    chosen = "averaged" if f1["averaged"] > f1["best round"] else "best round"
    record = {"rule": AVERAGE_RULE, "checkpoints": files, "dev_f1": f1, "chosen": chosen}
    model, scored = dev[chosen]
    return model, vocab, scored, record


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--share-embeddings", action="store_true",
                        help="one embedding table for source, target and output layer, as in the paper's "
                             "translation models")
    parser.add_argument("--run", help="default runs/parsing, or runs/parsing-tied with --share-embeddings")
    parser.add_argument("--results", help="default results/parsing, or results/parsing-tied")
    parser.add_argument("--treebank", help="folder of wsj_NNNN.mrg files (default: DATA/ptb-sample or NLTK's)")
    every = [n for names in PILOT_SETTINGS.values() for n in names()]
    parser.add_argument("--pilot", nargs="*", metavar="SETTING", choices=every,
                        help=f"train the rate and dropout pilot instead (all settings, or those named: "
                             f"{', '.join(PILOT)}); or settings of the source vocabulary pilot "
                             f"({', '.join(VOCAB_PILOT)}), or of the attention dropout pilot "
                             f"({', '.join(ATTN_NAMES)}), which starts from the former's choice")
    parser.add_argument("--from-pilot", nargs="?", const="", metavar="SETTING",
                        help="begin with the rate pilot's run of its chosen setting "
                             "(results/parsing-pilot/results.json), which the profile must hold: its rounds are "
                             "this run's first rounds; or, named, "
                             "with any pilot's run of that setting: the paper's run where the profile holds it, "
                             "else carried on as a labelled variant in runs/parsing-SETTING and "
                             "results/parsing-SETTING")
    parser.add_argument("--semi", action="store_true",
                        help="Table 4's second row: the final run from the run of the mix of gold and silver trees "
                             "that the semi-supervised pilot chose, in runs/parsing-semi and results/parsing-semi")
    parser.add_argument("--set", nargs="+", metavar="KEY=VALUE", dest="changes",
                        help="a labelled variant of the WSJ-only run: its profile with these changes (as "
                             "transformer.train's --set), trained from the first step by VARIANT_RULE in "
                             "runs/parsing-NAME and results/parsing-NAME; model.pointer_id=XX tells the decoder "
                             "which word it is on")
    parser.add_argument("--max-minutes", type=float,
                        help="stop training after this many minutes even if dev F1 still improves (default: the "
                             "profile's most rounds)")
    args = parser.parse_args(argv)
    named = args.from_pilot or None
    if named and (named not in every or args.share_embeddings):
        parser.error(f"--from-pilot SETTING: one of {', '.join(every)}, without --share-embeddings")
    if args.semi and (args.share_embeddings or args.from_pilot is not None or args.pilot is not None):
        parser.error("--semi starts from the semi-supervised pilot's choice: without --share-embeddings, "
                     "--from-pilot or --pilot")
    if args.changes and (args.share_embeddings or args.semi or args.from_pilot is not None
                         or args.pilot is not None):
        parser.error("--set trains a variant of the WSJ-only run from its first step: without "
                     "--share-embeddings, --semi, --from-pilot or --pilot")
    changes = variant_profile = None
    if args.changes:
        try:
            changes = Setting.parse(args.changes)
            # every value is checked now, before the corpus is prepared; a symbol once the vocabulary is made
            variant_profile = (changes.without("model.pointer_id") if symbolic(changes) else changes).apply(PROFILE)
        except ValueError as err:
            parser.error(str(err))
    name = "parsing-tied" if args.share_embeddings else "parsing"
    profile = SHARED_PROFILE if args.share_embeddings else PROFILE
    run = Path(args.run or ROOT / "runs" / name)
    results = Path(args.results or ROOT / "results" / name)
    # the corpus and the pilot live beside the run folder, not in it: a run folder holds only a run
    data_root = run.with_name(run.name + "-corpus")
    pilot_runs, pilot_results = run.with_name(run.name + "-pilot"), results.with_name(results.name + "-pilot")
    variant, row = None, "WSJ only"
    if args.semi:
        try:
            named = chosen_setting(pilot_folder(pilot_results, "semi"), list(SEMI_PILOT.values())).name
        except ValueError as err:
            sys.exit(f"--semi: {err}; run python scripts/parsing.py --pilot {' '.join(SEMI_PILOT)} first")
    if named:
        setting = pilot_setting(named, pilot_results)
        if setting.apply(profile) != profile:
            profile = setting.apply(PROFILE)
            if pilot_of(named) == "semi":       # Table 4's second row, not a variant of the first
                row, suffix = "semi-supervised", "semi"
            else:
                variant = suffix = named
            run, results = run.with_name(f"{run.name}-{suffix}"), results.with_name(f"{results.name}-{suffix}")
    if changes:
        profile, variant = variant_profile, changes.name
        run, results = run.with_name(f"{run.name}-{variant}"), results.with_name(f"{results.name}-{variant}")
    select_dir = run.with_name(run.name + "-select")
    treebank = read_treebank(args.treebank)
    counts = prepare_ptb(data_root, splits=treebank)
    # the semi-supervised corpora read the silver trees too
    silver = "silver" in CORPORA[profile.corpus].splits["train"]
    if silver or any(pilot_of(n) == "semi" for n in args.pilot or ()):
        counts |= prepare_ptb(data_root, splits={"silver": read_silver(SILVER)})
    if changes and silver:
        row = "semi-supervised"             # a variant of Table 4's second row
    if changes:
        profile = with_symbol_ids(changes, profile, run, data_root)
    if args.pilot is not None:
        # beside the run and its results: runs/parsing-pilot/SETTING, results/parsing-pilot
        return run_pilot(args.pilot or list(PILOT), treebank, data_root, pilot_runs, pilot_results)
    started_from = None
    if named or args.from_pilot is not None:
        which = pilot_of(named) if named else ""
        started_from = start_from_pilot(profile, run, select_dir, pilot_folder(pilot_runs, which),
                                         pilot_folder(pilot_results, which), named)
    # rounds, patience and the most rounds are the profile's (transformer/profiles.py says why)
    curve, best, stopped = astuple(train_in_rounds(
        profile, run, profile.round_steps, dev_score(treebank["dev"], load_split("ptb", "dev", data_root)),
        dev_decides(profile, "dev_f1", args.max_minutes), key="dev_f1", best_path=select_dir / BEST,
        curve_path=select_dir / CURVE, data_root=data_root))

    # the chosen model's dev trees are kept too, so that its dev F1 can be re-scored from the record's folder
    model, vocab, (dev_scores, dev_predicted, _), averaging = choose_average(profile, run, select_dir,
                                                                           treebank["dev"])
    gold = treebank["test"]
    decoded = {}
    for name, beam, constrained in (("beam", BEAM, True), ("greedy", 1, True), ("greedy_unconstrained", 1, False)):
        started = time.time()
        outputs = parse(model, vocab, gold, beam, constrained)
        scores, predicted, status = score(outputs, gold)
        decoded[name] = (outputs, predicted, {
            **{k: round(v, 3) if isinstance(v, float) else v for k, v in scores.items()},
            "status": status, "distinct_outputs": len(set(outputs)),
            "minutes": round((time.time() - started) / 60, 2)})
    outputs, predicted, test = decoded["beam"]
    xx = [out.split().count("XX") for out in outputs]
    words = [len(t.leaves()) for t in gold]
    test["coverage"] = {"mean_words": sum(words) / len(words), "mean_xx": sum(xx) / len(xx),
                        "xx_equals_words": sum(x == w for x, w in zip(xx, words))}
    dev_pairs = load_split("ptb", "dev", data_root)

    results.mkdir(parents=True, exist_ok=True)
    write_trees(results / "test.pred.mrg", predicted)
    write_trees(results / "dev.pred.mrg", dev_predicted)
    (results / "test.raw.txt").write_text("\n".join(outputs) + "\n", encoding="utf-8")
    keep_record(run, results, (TRAIN_LOG, DEV_LOG))
    record = {
        "task": "English constituency parsing, NLTK's 5% WSJ sample (wsj_0001-0199), split by file",
        "splits": counts, "profile": profile.name, "row": row, "corpus": profile.corpus, "variant": variant,
        "model": profile.model, "vocab_size": profile.vocab_size, "vocab_model": profile.vocab_model,
        "lr_factor": profile.lr_factor, "warmup_steps": profile.warmup_steps,
        "tokens_per_step": profile.tokens_per_step,
        "training": {"steps": curve[-1]["step"], "epochs": curve[-1]["epoch"],
                     "train_minutes": curve[-1]["train_minutes"],
                     "train_pairs": curve[-1]["train_pairs"], "parameters": model.num_parameters(),
                     "round_steps": profile.round_steps, "patience": profile.patience,
                     "patience_window": profile.patience_window, "min_rounds": profile.min_rounds,
                     "max_rounds": profile.max_rounds, "stopped_by": stopped,
                     "first_rounds_from_pilot": started_from},
        "dev_curve": curve,
        "chosen": {"round": best["round"], "step": best["step"], "epoch": best["epoch"],
                   "dev_f1": best["dev_f1"], "by": "dev F1, greedy, constrained"},
        "averaging": averaging,
        **({"variant_rule": VARIANT_RULE, "changes": changes.changes} if changes else {}),
        "dev": {"f1": round(dev_scores["f1"], 3), "trees": "dev.pred.mrg"},
        "decoding": {"beam_size": BEAM, "alpha": ALPHA, "max_extra": MAX_EXTRA, "constrained": True},
        "test": test,
        "test_greedy": decoded["greedy"][2],
        "test_greedy_unconstrained": decoded["greedy_unconstrained"][2],
        "dev_nll_sources": source_loss(model, vocab, dev_pairs),
        "encoder": encoder_diagnostics(model, vocab, [s for s, _ in dev_pairs]),
        "scoring": "labelled bracket P/R/F1 following evalb's COLLINS.prm (punctuation ignored, ADVP = PRT, "
                   "gold tags put back on predicted trees); all sentence lengths",
    }
    command = ("python scripts/parsing.py" + (" --share-embeddings" if args.share_embeddings else "")
               + (" --semi" if args.semi else "") + (" --set " + " ".join(args.changes) if changes else "")
               + ("" if args.from_pilot is None else " --from-pilot" + (f" {named}" if named else "")))
    write_record(results / "results.json", record, command)
    print(json.dumps({k: record[k] for k in ("training", "chosen", "test", "test_greedy",
                                              "dev_nll_sources", "encoder")}, indent=1))


if __name__ == "__main__":
    main()
