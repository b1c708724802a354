"""Chapter 6.3's result: a Transformer parser trained on NLTK's WSJ sample, scored evalb-style.

    python scripts/parsing.py        # prepares the corpus (runs/parsing-corpus), trains runs/parsing
                                     # round by round while dev F1 improves, decodes test, scores
    python scripts/parsing.py --share-embeddings   # the same with the paper's one embedding table
                                     # for source, target and output (runs/parsing-tied, results/parsing-tied)

    python scripts/parsing.py --pilot [SETTING ...]   # train settings of a pilot (default: the rate pilot's)
    python scripts/parsing.py --from-pilot            # the final run, begun with the rate pilot's chosen run
    python scripts/parsing.py --from-pilot SETTING    # ... or with any pilot's run of SETTING: the paper's
                                     # run where the profile holds SETTING, else a labelled variant in
                                     # runs/parsing-SETTING and results/parsing-SETTING
    python scripts/parsing.py --semi                  # Table 4's second row, from the mix the pilot chose
    python scripts/parsing.py --silver 8500           # that row's curve (CURVE_RULE): 8,500 kept trees of
                                     # the large silver treebank, in runs/ and results/parsing-silver-8500
    python scripts/parsing.py --set model.pointer_id=XX   # a labelled variant: the WSJ-only run with
                                     # changes (transformer.train's --set), in runs/parsing-NAME and
                                     # results/parsing-NAME; --set corpus=ptb-semi ... for the second row

The pilots are values of the package (transformer/parser_training.py, chapter 6.3 (continued)); each
setting's record lands in results/parsing-pilot[-NAME]/, and results.json holds the choice by the rule
fixed before the pilot ran, once every setting it reads has a record. Training goes in rounds
(transformer.rounds); after each round the last checkpoint parses dev greedily, under the constraint that
only trees over the sentence's words are written, and is scored; the profile's patience stops it (or
--max-minutes). The model is the best round, or the mean of the last checkpoints where dev says so
(AVERAGE_RULE); test is decoded as the paper did (beam 21, alpha 0.3, input length + 300) and greedily.
Killed, the command resumes. Writes results/parsing[-NAME]/: results.json (dev curve, scores,
diagnostics, provenance), test.pred.mrg and dev.pred.mrg (gold tags put back), test.raw.txt and the logs.
"""
import argparse
import json
import sys
from dataclasses import astuple
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
import transformer.parser_training as pt  # noqa: E402
from transformer.corpora import CORPORA, load_split  # noqa: E402
from transformer.distributed import Runtime  # noqa: E402
from transformer.parsing import prepare_ptb, read_treebank, write_trees  # noqa: E402
from transformer.profiles import Setting, get_profile  # noqa: E402
from transformer.rounds import dev_decides, train_in_rounds  # noqa: E402
from transformer.run import BEST, CURVE, DEV_LOG, TRAIN_LOG, keep_record, load_model, prepare_data  # noqa: E402
from transformer.runlog import add_uncommitted_flag, refuse_uncommitted, write_record  # noqa: E402

# 4 layers of 128 and separate tables for source and target (their entries are disjoint), at the
# settings the pilots chose (transformer/profiles.py); and the same with the paper's one table
PROFILE, SHARED_PROFILE = get_profile("ptb-parse"), get_profile("ptb-parse-shared")
SILVER = ROOT / "results" / "parsing-semi" / "silver.jsonl.gz"
LARGE_SILVER = ROOT / "results" / "silver-treebank"    # the curve's (transformer.parser_training)
# each mode, and the options it is never given with
EXCLUSIVE = {"pilot": ("share_embeddings",),
             "from_pilot": ("share_embeddings", "pilot"),
             "semi": ("share_embeddings", "from_pilot", "pilot"),
             "changes": ("share_embeddings", "semi", "from_pilot", "pilot"),
             "silver": ("share_embeddings", "semi", "from_pilot", "pilot", "changes")}
VARIANT_RULE = ("the WSJ-only run's profile with the variant's changes, trained from its first step; the round by the "
                "same smoothed dev F1 and patience, test decoded by AVERAGE_RULE; compared with the WSJ-only run on "
                "the same test sentences by a paired bootstrap (transformer.parsing.f1_difference)")
AVERAGE_RULE = ("the mean of the run's last average_last checkpoints (the paper averaged its last checkpoints) "
                "against the best round alone: the higher greedy dev F1; equal, the best round")


def symbolic(changes):
    """The target symbol (XX) that the --set `changes` name as model.pointer_id, or None."""
    symbol = changes.changes.get("model.pointer_id")
    return symbol if isinstance(symbol, str) else None


def checkable(changes):
    """The --set `changes` whose values can be checked before the vocabulary exists: a symbolic
    model.pointer_id (XX) left out, for its id comes from the vocabulary."""
    return changes.without("model.pointer_id") if symbolic(changes) else changes


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


def pilot_setting(name, results):
    """The Setting named `name` of whichever pilot holds it (with the changes of the choice it starts from)."""
    return next(s for s in pt.pilot_of(name).grid(results) if s.name == name)


def start_from_pilot(profile, run, pilot_runs, pilot_results, name):
    """Begin `run` with the pilot's run of the setting `name`, so that the pilot's rounds are the run's first:
    the same profile, seed and schedule would train them again step for step. Refused unless `profile` holds
    that setting."""
    pilot = pt.pilot_of(name)
    path = pilot.folder(pilot_results) / f"{name}.json"
    if not path.exists():
        sys.exit(f"--from-pilot: {path} does not exist; run python scripts/parsing.py --pilot {name} first")
    trained = json.loads(path.read_text())
    # records made before the vocabulary pilot read BPE sources of gold trees alone
    held = (trained["lr_factor"], trained["model"], trained.get("vocab_model", "bpe"), trained.get("corpus", "ptb"))
    wanted = (profile.lr_factor, profile.model, profile.vocab_model, profile.corpus)
    if held != wanted:
        sys.exit(f"--from-pilot: the pilot's run of {name} has lr_factor, model, vocab_model, corpus {held}, "
                 f"not the profile's {wanted}; give the profile the chosen setting first")
    pilot.continue_into(run, pilot_runs, Setting(name, {}))


def choose_average(profile, run, select_dir, dev_trees):
    """The model to decode test with, by AVERAGE_RULE where the profile averages checkpoints, else the
    best round's: (model, vocab, its greedy dev score of `dev_trees`, the record of the choice or None)."""
    model, vocab, _ = load_model(select_dir / BEST)
    if profile.average_last == 1:
        return model, vocab, pt.score(pt.parse(model, vocab, dev_trees, 1), dev_trees), None
    averaged, _, files = load_model(run)       # the last average_last, or as many as the run has
    dev = {name: (m, pt.score(pt.parse(m, vocab, dev_trees, 1), dev_trees))
           for name, m in (("best round", model), ("averaged", averaged))}
    f1 = {name: round(scored[0]["f1"], 3) for name, (_, scored) in dev.items()}
    chosen = "averaged" if f1["averaged"] > f1["best round"] else "best round"
    model, scored = dev[chosen]
    return model, vocab, scored, {"rule": AVERAGE_RULE, "checkpoints": files, "dev_f1": f1, "chosen": chosen}


def build_parser():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--share-embeddings", action="store_true",
                        help="one embedding table for source, target and output layer, as in the paper's "
                             "translation models")
    parser.add_argument("--run", help="default runs/parsing, or runs/parsing-tied with --share-embeddings")
    parser.add_argument("--results", help="default results/parsing, or results/parsing-tied")
    parser.add_argument("--treebank", help="folder of wsj_NNNN.mrg files (default: DATA/ptb-sample or NLTK's)")
    every = [n for p in pt.PILOTS for n in p.names]
    parser.add_argument("--pilot", nargs="*", metavar="SETTING", choices=every,
                        help=f"train settings of one pilot instead (default: all of the rate pilot's): "
                             f"{', '.join(every)}")
    parser.add_argument("--from-pilot", nargs="?", const="", metavar="SETTING", choices=every + [""],
                        help="begin with the rate pilot's run of its chosen setting, which the profile must hold; "
                             "or, named, with any pilot's run of that setting: the paper's run where the profile "
                             "holds it, else a labelled variant in runs/parsing-SETTING and results/parsing-SETTING")
    parser.add_argument("--semi", action="store_true",
                        help="Table 4's second row: the final run from the run of the mix of gold and silver trees "
                             "that the mixing pilot chose, in runs/parsing-semi and results/parsing-semi")
    parser.add_argument("--silver", type=int, choices=pt.CURVE_SIZES, metavar="N",
                        help="a point of the semi-supervised row's curve (CURVE_RULE): N silver trees of "
                             f"the large treebank, one of {', '.join(map(str, pt.CURVE_SIZES))}, in "
                             "runs/parsing-silver-N and results/parsing-silver-N")
    parser.add_argument("--set", nargs="+", metavar="KEY=VALUE", dest="changes",
                        help="a labelled variant of the WSJ-only run: its profile with these changes (as "
                             "transformer.train's --set), trained from the first step by VARIANT_RULE in "
                             "runs/parsing-NAME and results/parsing-NAME")
    parser.add_argument("--max-minutes", type=float,
                        help="stop training after this many minutes even if dev F1 still improves (default: the "
                             "profile's most rounds)")
    add_uncommitted_flag(parser)
    return parser


def parse_args(argv):
    """The options, each mode checked against EXCLUSIVE, and a --set's values against the profile."""
    parser = build_parser()
    args = parser.parse_args(argv)
    given = {k for k in EXCLUSIVE.keys() | {"share_embeddings"} if getattr(args, k) not in (None, False)}
    for mode, never in EXCLUSIVE.items():
        if mode in given and given & set(never):
            flag = {n: "set" if n == "changes" else n.replace("_", "-") for n in (mode, *never)}
            parser.error(f"--{flag[mode]} is used without " + ", ".join(f"--{flag[n]}" for n in never))
    args.setting = None
    if args.changes:
        try:
            args.setting = Setting.parse(args.changes)
            # every value is checked now, before the corpus is prepared; a symbol once the vocabulary is made
            checkable(args.setting).apply(PROFILE)
        except ValueError as err:
            parser.error(str(err))
    return args


def folders(args):
    """The WSJ-only run's folder and its results' (or the tied run's), beside which everything else lives."""
    name = "parsing-tied" if args.share_embeddings else "parsing"
    return Path(args.run or ROOT / "runs" / name), Path(args.results or ROOT / "results" / name)


def plan(args):
    """What the command trains: (profile, run, results, the pilot setting it begins with or None, variant
    name or None, Table 4 row), from the options."""
    profile = SHARED_PROFILE if args.share_embeddings else PROFILE
    run, results = folders(args)
    pilot_results = results.with_name(results.name + "-pilot")
    named, variant, row, suffix = args.from_pilot or None, None, "WSJ only", None
    if args.semi:
        try:
            named = pt.SEMI_PILOT.chosen(pilot_results).name
        except ValueError as err:
            sys.exit(f"--semi: {err}; run python scripts/parsing.py --pilot {' '.join(pt.SEMI_PILOT.names)} first")
    if named and (setting := pilot_setting(named, pilot_results)).apply(profile) != profile:
        profile = setting.apply(PROFILE)
        if pt.pilot_of(named) is pt.SEMI_PILOT:      # Table 4's second row, not a variant of the first
            row, suffix = "semi-supervised", "semi"
        else:
            variant = suffix = named
    if args.from_pilot == "":                       # the rate pilot's choice, which the profile must hold
        try:
            chosen = pt.RATE_PILOT.chosen(pilot_results)
        except ValueError as err:
            sys.exit(f"--from-pilot: {err}; run python scripts/parsing.py --pilot first")
        if chosen is None:
            sys.exit(f"--from-pilot: the pilot chose no setting ({pilot_results / 'results.json'}); there is "
                     f"no run to begin with")
        named = chosen.name
    if args.silver:
        try:
            mix = pilot_setting(pt.SEMI_PILOT.chosen(pilot_results).name, pilot_results)
        except ValueError as err:
            sys.exit(f"--silver: {err}; run python scripts/parsing.py --pilot {' '.join(pt.SEMI_PILOT.names)} first")
        profile, row, suffix = mix.apply(PROFILE), "semi-supervised", f"silver-{args.silver}"
    if args.setting:
        profile, variant = checkable(args.setting).apply(PROFILE), args.setting.name
        suffix = variant
        if "silver" in CORPORA[profile.corpus].splits["train"]:
            row = "semi-supervised"             # a variant of Table 4's second row
    if suffix:
        run, results = run.with_name(f"{run.name}-{suffix}"), results.with_name(f"{results.name}-{suffix}")
    return profile, run, results, named, variant, row


def prepare_corpus(args, profile, data_root):
    """(gold treebank, split counts, a curve point's silver provenance or None); the corpus in `data_root`."""
    treebank, silver = read_treebank(args.treebank), None
    counts = prepare_ptb(data_root, splits=treebank)
    if args.silver:
        try:
            trees, silver = pt.first_kept(args.silver, LARGE_SILVER)
        except ValueError as err:
            sys.exit(f"--silver: {err}")
        counts |= prepare_ptb(data_root, splits={"silver": trees})
    elif ("silver" in CORPORA[profile.corpus].splits["train"]
            or any(pt.pilot_of(n) is pt.SEMI_PILOT for n in args.pilot or ())):
        try:
            counts |= prepare_ptb(data_root, splits={"silver": pt.read_silver(SILVER)})
        except ValueError as err:
            sys.exit(f"{err}; make it with python scripts/silver_treebank.py")
    return treebank, counts, silver


def run_pilot(names, treebank, data_root, pilot_runs, pilot_results):
    """The settings `names` of one pilot (default: the rate pilot's) trained and recorded; its choice once
    every setting its rule reads has a record."""
    pilots = {pt.pilot_of(n).name: pt.pilot_of(n) for n in names} or {"": pt.RATE_PILOT}
    if len(pilots) > 1:
        sys.exit(f"--pilot: {', '.join(names)} belong to different pilots; name the settings of one")
    pilot, = pilots.values()
    try:
        pilot.start(pilot_results)
    except ValueError as err:
        sys.exit(f"--pilot: the {pilot.name} pilot starts from the {pilot.after.name} pilot's choice: {err}")
    trial = pt.pilot_trial(PROFILE, pilot.folder(pilot_runs), treebank["dev"],
                           load_split("ptb", "dev", data_root), data_root)
    chosen = pilot.run(trial, pilot_results, names or pilot.names)
    folder = pilot.folder(pilot_results)
    waiting = [s for s in pilot.names if s not in pilot.variants and not (folder / f"{s}.json").exists()]
    print(f"pilot: the choice waits for {', '.join(waiting)}" if waiting
          else f"pilot chose {chosen and chosen['setting']}")


def final_record(args, profile, counts, curve, stopped, started_from, variant, row, parameters):
    """The run's record, less what choosing and decoding add."""
    return {
        "task": "English constituency parsing, NLTK's 5% WSJ sample (wsj_0001-0199), split by file",
        "splits": counts, "profile": profile.name, "row": row, "corpus": profile.corpus, "variant": variant,
        "model": profile.model, "vocab_size": profile.vocab_size, "vocab_model": profile.vocab_model,
        "lr_factor": profile.lr_factor, "warmup_steps": profile.warmup_steps,
        "tokens_per_step": profile.tokens_per_step,
        "training": {"steps": curve[-1]["step"], "epochs": curve[-1]["epoch"],
                     "train_minutes": curve[-1]["train_minutes"],
                     "train_pairs": curve[-1]["train_pairs"], "parameters": parameters,
                     "round_steps": profile.round_steps, "patience": profile.patience,
                     "patience_window": profile.patience_window, "min_rounds": profile.min_rounds,
                     "max_rounds": profile.max_rounds, "stopped_by": stopped,
                     "first_rounds_from_pilot": started_from},
        "dev_curve": curve,
        **({"variant_rule": VARIANT_RULE, "changes": args.setting.changes} if args.setting else {}),
    }


def main(argv=None):
    args = parse_args(argv)
    profile, run, results, named, variant, row = plan(args)
    base_run, base_results = folders(args)
    refuse_uncommitted(base_results, args.uncommitted)
    # the corpus (a curve point's own: its silver trees are its own) and the pilots live beside the run
    # folder, not in it: a run folder holds only a run
    data_root = Path(f"{run if args.silver else base_run}-corpus")
    pilot_runs, pilot_results = (base_run.with_name(base_run.name + "-pilot"),
                                 base_results.with_name(base_results.name + "-pilot"))
    select_dir = run.with_name(run.name + "-select")
    treebank, counts, silver = prepare_corpus(args, profile, data_root)
    if args.pilot is not None:
        return run_pilot(args.pilot, treebank, data_root, pilot_runs, pilot_results)
    if args.setting:
        profile = with_symbol_ids(args.setting, profile, run, data_root)
    if named:
        start_from_pilot(profile, run, pilot_runs, pilot_results, named)
    dev_pairs = load_split("ptb", "dev", data_root)
    curve, best, stopped = astuple(train_in_rounds(
        profile, run, profile.round_steps, pt.dev_score(treebank["dev"], dev_pairs, profile.max_tokens),
        dev_decides(profile, "dev_f1", args.max_minutes), key="dev_f1", best_path=select_dir / BEST,
        curve_path=select_dir / CURVE, data_root=data_root))
    # the chosen model's dev trees are kept too, so that its dev F1 can be re-scored from the record's folder
    model, vocab, (dev_scores, dev_predicted, _), averaging = choose_average(profile, run, select_dir,
                                                                           treebank["dev"])
    decoded = pt.decode_test(model, vocab, treebank["test"])
    outputs, predicted, test = decoded["beam"]
    results.mkdir(parents=True, exist_ok=True)
    write_trees(results / "test.pred.mrg", predicted)
    write_trees(results / "dev.pred.mrg", dev_predicted)
    (results / "test.raw.txt").write_text("\n".join(outputs) + "\n", encoding="utf-8")
    keep_record(run, results, (TRAIN_LOG, DEV_LOG))
    record = final_record(args, profile, counts, curve, stopped, named, variant, row, model.num_parameters())
    record |= {
        "chosen": {"round": best["round"], "step": best["step"], "epoch": best["epoch"],
                   "dev_f1": best["dev_f1"], "by": "dev F1, greedy, constrained"},
        "averaging": averaging, "dev": {"f1": round(dev_scores["f1"], 3), "trees": "dev.pred.mrg"},
        "decoding": {"beam_size": pt.BEAM, "alpha": pt.ALPHA, "max_extra": pt.MAX_EXTRA, "constrained": True},
        "test": test, "test_greedy": decoded["greedy"][2],
        "test_greedy_unconstrained": decoded["greedy_unconstrained"][2],
        "dev_nll_sources": pt.source_loss(model, vocab, dev_pairs, profile.max_tokens),
        "encoder": pt.encoder_diagnostics(model, vocab, [s for s, _ in dev_pairs]),
        "scoring": "labelled bracket P/R/F1 following evalb's COLLINS.prm (punctuation ignored, ADVP = PRT, "
                   "gold tags put back on predicted trees); all sentence lengths",
        **({"silver": {"treebank": "results/silver-treebank/silver.json", **silver},
            "curve_rule": pt.CURVE_RULE} if silver else {}),
    }
    command = ("python scripts/parsing.py" + (" --share-embeddings" if args.share_embeddings else "")
               + (" --semi" if args.semi else "") + (f" --silver {args.silver}" if args.silver else "")
               + (" --set " + " ".join(args.changes) if args.setting else "")
               + ("" if args.from_pilot is None else " --from-pilot" + (f" {args.from_pilot}" if args.from_pilot else "")))
    write_record(results / "results.json", record, command)
    print(json.dumps({k: record[k] for k in ("training", "chosen", "test", "test_greedy",
                                              "dev_nll_sources", "encoder")}, indent=1))


if __name__ == "__main__":
    main()
