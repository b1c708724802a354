"""The book's real result: train on Multi30k English->German on this CPU, then translate its test set.

    python scripts/multi30k_cpu.py            # trains (or resumes) runs/multi30k-cpu, then evaluates

Training uses the `multi30k-cpu` profile of transformer.train: a fixed number of steps (2400, about an
hour on a 2-core CPU), so that every machine trains the same model. It trains in rounds of the profile's
dev interval (transformer.rounds), each round's model checked for a collapsed encoder (dev_curve.json). Decoding settings are then chosen
on the dev set only (val, 1014 sentences): how many of the last checkpoints to average and the length
penalty alpha, at beam 5. The chosen setting translates test_2016_flickr once, scored with sacreBLEU
cased and lowercased. Everything the book shows is written to results/multi30k-cpu/: results.json
(the dev grid, test metrics, hardware, time, commit, command), the training and dev logs, the rounds, the
translations, worked_example.json (one dev sentence's beam search step by step and its attention
weights), and model.pt: the chosen average of checkpoints in float16, with its vocabulary (about 12 MB,
transformer.checkpoint.load_model reads it), scored on test again as it is shipped.
"""
import argparse
import hashlib
import json
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from transformer.checkpoint import save_model  # noqa: E402
from transformer.rounds import budget, train_in_rounds  # noqa: E402
from transformer.run import (CURVE, DEV_LOG, PROFILE, RUN_INFO, TRAIN_LOG, checkpoint_paths,  # noqa: E402
                             checkpoint_step, keep_record, load_model)
from transformer.corpora import load_split  # noqa: E402
from transformer.data import BOS, EOS  # noqa: E402
from transformer.decode import length_penalty, simple_beam_search  # noqa: E402
from transformer.decode import translate  # noqa: E402
from transformer.evaluate import attention_maps, evaluate_run, sacre_bleu  # noqa: E402
from transformer.paper import DECODING  # noqa: E402
from transformer.profiles import get_profile  # noqa: E402
from transformer.runlog import add_uncommitted_flag, refuse_uncommitted, write_record  # noqa: E402
from transformer.train import train  # noqa: E402

BEAM = 5
AVERAGES = (1, 5, 10)              # how many of the last checkpoints to average (the profile keeps 10)
ALPHAS = (0.0, 0.6, 1.0, 1.5, 2.0, 2.5)   # length penalty ((5 + |Y|) / 6) ** alpha


def both_bleu(hyps, refs):
    cased, lowercased = sacre_bleu(hyps, refs)[0], sacre_bleu(hyps, refs, lowercase=True)[0]
    return {"sacrebleu": round(cased, 2), "sacrebleu_lowercase": round(lowercased, 2)}


def dev_grid(run, corpus, averages, alphas, data_root, max_sentences=None):
    """Dev BLEU for every (checkpoints averaged, alpha) pair, and how many dev sentences were
    translated; the test set is never read here."""
    pairs = load_split(corpus, "dev", data_root)[:max_sentences]
    sources, refs = [s for s, _ in pairs], [t for _, t in pairs]
    grid = []
    for k in averages:
        model, vocab, used = load_model(run, k)
        for alpha in alphas:
            hyps = translate(model, vocab, sources, BEAM, alpha, progress=False)
            row = {"average_last": len(used), "alpha": alpha, **both_bleu(hyps, refs)}
            grid.append(row)
            print(f"dev  average {row['average_last']:>2}  alpha {alpha:.1f}  BLEU {row['sacrebleu']:.2f}  "
                  f"lowercased {row['sacrebleu_lowercase']:.2f}", flush=True)
    return grid, len(sources)


def worked_example(model, vocab, corpus, alpha, data_root, candidates=300, max_words=12):
    """A short dev sentence whose best translation changes with the length penalty: its beam search
    step by step, its finished hypotheses, and every head's attention weights over the winner."""
    contrast = alpha if alpha > 0 else 0.6          # the length penalty set against none at all
    pieces = lambda ids: [vocab.sp.id_to_piece(i) for i in ids]
    first = None
    for source, reference in load_split(corpus, "dev", data_root)[:candidates]:
        if len(source.split()) > max_words:
            continue
        src = torch.tensor([vocab.encode(source) + [EOS]])
        trace = []
        simple_beam_search(model, src, BOS, EOS, BEAM, contrast, trace=trace)
        finished = [h for step in trace for h in step["sentences"][0]["ended"]]
        winner = {a: max(finished, key=lambda h: h["logprob"] / length_penalty(h["length"], a)) for a in (0.0, contrast)}
        first = first or (source, reference, src, trace, finished, winner)
        if winner[0.0] is not winner[contrast]:
            break
    else:   # no sentence among the candidates changes its winner: show the first one, and say so
        source, reference, src, trace, finished, winner = first
    best = winner[contrast]["tokens"]
    maps = attention_maps(model, src, torch.tensor([[BOS] + best[:-1]]))
    rounded = lambda t: [[[[round(x, 3) for x in row] for row in head] for head in layer] for layer in t.tolist()]
    return {
        "source": source, "reference": reference, "source_pieces": pieces(src[0].tolist()),
        "beam_size": BEAM, "alpha": contrast, "winner_changes": winner[0.0] is not winner[contrast],
        "steps": [{"step": st["step"],
                   "beams": [{"pieces": pieces(b["tokens"]), "logprob": round(b["logprob"], 4)}
                             for b in st["sentences"][0]["beams"]],
                   "ended": [{"pieces": pieces(h["tokens"]), "logprob": round(h["logprob"], 4), "length": h["length"]}
                             for h in st["sentences"][0]["ended"]]} for st in trace],
        "finished": [{"pieces": pieces(h["tokens"]), "text": vocab.decode(h["tokens"]),
                      "logprob": round(h["logprob"], 4), "length": h["length"]} for h in finished],
        "winner_alpha_0": vocab.decode(winner[0.0]["tokens"]), "winner": vocab.decode(best),
        "output_pieces": pieces(best),
        "attention": {"encoder": rounded(maps["encoder"]), "cross": rounded(maps["cross"])},
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", default=str(ROOT / "runs" / "multi30k-cpu"))
    parser.add_argument("--results", default=str(ROOT / "results" / "multi30k-cpu"))
    parser.add_argument("--data-dir", help="corpus cache directory (default $TRANSFORMER_DATA)")
    parser.add_argument("--profile", default="multi30k-cpu", help="a smaller profile for a quick check")
    parser.add_argument("--max-sentences", type=int, help="use only the first N dev and test sentences")
    add_uncommitted_flag(parser)
    args = parser.parse_args()
    run, out = Path(args.run), Path(args.results)
    refuse_uncommitted(out, args.uncommitted)
    profile = get_profile(args.profile)

    checkpoints = checkpoint_paths(run)
    done_before = bool(checkpoints) and checkpoint_step(checkpoints[-1]) >= profile.max_steps
    # rounds of the dev interval: the trainer's schedule, checkpoints and dev scores are those of one
    # uninterrupted run, and each round adds the encoder's similarity along a sentence
    round_steps = profile.eval_every
    if not done_before or (run / CURVE).exists():    # a run finished before rounds existed has none
        dev_sources = [s for s, _ in load_split(profile.corpus, "dev", args.data_dir)[:args.max_sentences]]
        train_in_rounds(profile, run, round_steps, lambda model, vocab: {},
                        [budget(rounds=-(-profile.max_steps // round_steps))],
                        sentences=dev_sources, data_root=args.data_dir)
    summary = train(profile, run, args.data_dir)          # returns at once: already done
    started = time.time()
    grid, dev_sentences = dev_grid(run, profile.corpus, [k for k in AVERAGES if k <= profile.keep_last], ALPHAS,
                    args.data_dir, args.max_sentences)
    # the highest lowercased dev BLEU; on a tie, the earlier row (fewer checkpoints, smaller alpha)
    chosen = max(grid, key=lambda row: (row["sacrebleu_lowercase"], -grid.index(row)))
    k, alpha = chosen["average_last"], chosen["alpha"]
    test = evaluate_run(run, "test", k, BEAM, alpha, args.data_dir, args.max_sentences)
    refs = test["references"]
    # comparisons on the same test set, none of them used to choose anything
    model, vocab, _ = load_model(run, k)
    greedy = both_bleu(translate(model, vocab, test["sources"], 1), refs)
    paper_decoding = both_bleu(translate(model, vocab, test["sources"], DECODING["beam_size"], DECODING["alpha"]),
                               refs)
    single, _, _ = load_model(run, 1)
    last_only = both_bleu(translate(single, vocab, test["sources"], BEAM, alpha), refs)
    example = worked_example(model, vocab, profile.corpus, alpha, args.data_dir)

    # the model readers get: the chosen average, stored in float16, scored again as stored
    out.mkdir(parents=True, exist_ok=True)
    save_model(model, vocab, out / "model.pt")
    shipped, shipped_vocab, _ = load_model(out / "model.pt")
    shipped_hyps = translate(shipped, shipped_vocab, test["sources"], BEAM, alpha)
    shipped_model = {"file": "model.pt", "dtype": "float16", "average_last": k,
                     "bytes": (out / "model.pt").stat().st_size,
                     "sha256": hashlib.sha256((out / "model.pt").read_bytes()).hexdigest(),
                     "beam_size": BEAM, "alpha": alpha, **both_bleu(shipped_hyps, refs),
                     "same_translation_as_float32": sum(a == b for a, b in zip(shipped_hyps, test["hypotheses"]))}
    eval_minutes = (time.time() - started) / 60

    keep_record(run, out, (TRAIN_LOG, DEV_LOG, PROFILE, RUN_INFO) + ((CURVE,) if (run / CURVE).exists() else ()))
    (out / "translations.de").write_text("\n".join(test["hypotheses"]) + "\n", encoding="utf-8")
    run_info = json.loads((run / RUN_INFO).read_text())
    if done_before:     # this call trained nothing: its run_info entry names no training commit
        run_info = run_info[:-1]
    results = {
        "task": f"{profile.corpus} English->German, test_2016_flickr",
        "commit_training": sorted({r["commit"] for r in run_info if r["commit"]}),
        "profile": profile.name,
        "training": summary,
        "evaluation_minutes": round(eval_minutes, 1),
        "dev_grid": {"beam_size": BEAM, "sentences": dev_sentences, "rows": grid},
        "chosen_on_dev": {"average_last": k, "alpha": alpha, "beam_size": BEAM},
        "test": {key: v for key, v in test.items() if key not in ("sources", "references", "hypotheses")},
        "test_greedy": greedy,
        "test_paper_decoding": {"beam_size": DECODING["beam_size"], "alpha": DECODING["alpha"], **paper_decoding},
        "test_last_checkpoint": last_only,
        "shipped_model": shipped_model,
    }
    (out / "worked_example.json").write_text(json.dumps(example, ensure_ascii=False) + "\n", encoding="utf-8")
    results = write_record(out / "results.json", results)
    print(json.dumps({key: v for key, v in results.items() if key != "dev_grid"}, indent=1, ensure_ascii=False))


if __name__ == "__main__":
    main()
