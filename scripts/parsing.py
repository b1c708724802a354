"""Chapter 6.3's result: a Transformer parser trained on NLTK's WSJ sample, scored evalb-style.

    python scripts/parsing.py        # prepares the corpus (runs/parsing-corpus), trains (or resumes)
                                     # runs/parsing, decodes, scores

The test set is decoded as the paper did for parsing: beam 21, alpha 0.3, at most the input length
plus 300 output tokens, from the average of the last 5 checkpoints. Output that is not a tree is
repaired (or, with no bracket at all, scored as an empty tree) and counted. Writes results/parsing/:
results.json (scores, counts, hardware, time, commit, command), test.pred.mrg (one predicted tree per
line, in test order, with the gold part-of-speech tags put back; "()" for an empty tree), test.raw.txt
(the decoder's output before repair) and the logs.
"""
import argparse
import json
import shutil
import sys
import time
from collections import Counter
from pathlib import Path


ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from transformer.evaluate import load_model, translate  # noqa: E402
from transformer.parsing import bracket_scores, parse_output, prepare_ptb, read_treebank, with_tags  # noqa: E402
from transformer.runlog import git_commit, hardware  # noqa: E402
from transformer.train import Profile, train  # noqa: E402

# The paper's parser had 4 layers of d_model 1024; here 4 layers of 128, trained for a fixed number of steps.
PROFILE = Profile("ptb-parse", "ptb", "base", "constituency parsing on the WSJ sample, 2-core CPU",
                  model={"N": 4, "d_model": 128, "d_ff": 512, "h": 4, "d_k": 32, "d_v": 32, "P_drop": 0.2},
                  vocab_size=8000, max_len=400, clean_ratio=10.0, max_tokens=3000, tokens_per_step=3000,
                  warmup_steps=300, lr_factor=0.35, max_steps=1200, save_every_steps=100, keep_last=5,
                  average_last=5, eval_every=200, amp=False)
BEAM, ALPHA, MAX_EXTRA = 21, 0.3, 300     # the paper's decoding settings for parsing


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", default=str(ROOT / "runs" / "parsing"))
    parser.add_argument("--results", default=str(ROOT / "results" / "parsing"))
    parser.add_argument("--treebank", help="folder of wsj_NNNN.mrg files (default: DATA/ptb-sample or NLTK's)")
    args = parser.parse_args()
    run, results = Path(args.run), Path(args.results)
    # the corpus lives beside the run folder, not in it: a run folder holds only a run
    data_root = run.with_name(run.name + "-corpus")
    treebank = read_treebank(args.treebank)
    counts = prepare_ptb(data_root, splits=treebank)
    summary = train(PROFILE, run, data_root)

    model, vocab, used = load_model(run, PROFILE.average_last)
    gold = treebank["test"]
    words = [tree.leaves() for tree in gold]
    started = time.time()
    outputs = translate(model, vocab, [" ".join(w) for w in words], beam_size=BEAM, alpha=ALPHA,
                        max_extra=MAX_EXTRA, batch_tokens=100_000)
    decode_minutes = (time.time() - started) / 60
    predicted, status = [], Counter()
    for out, w, g in zip(outputs, words, gold):
        tree, kind = parse_output(out.split(), w)
        status[kind] += 1
        predicted.append(None if tree is None else with_tags(tree, [tag for _, tag in g.pos()]))
    scores = bracket_scores(gold, predicted)
    # does the decoder emit one XX per input word? (a tree must cover the sentence)
    xx = [out.split().count("XX") for out in outputs]
    coverage = {"mean_words": sum(map(len, words)) / len(words), "mean_xx": sum(xx) / len(xx),
                "xx_equals_words": sum(x == len(w) for x, w in zip(xx, words))}

    results.mkdir(parents=True, exist_ok=True)
    (results / "test.pred.mrg").write_text(
        "".join(("()" if t is None else t.pformat(margin=10**9)) + "\n" for t in predicted), encoding="utf-8")
    (results / "test.raw.txt").write_text("\n".join(outputs) + "\n", encoding="utf-8")
    for name in ("train_log.csv", "dev_log.csv"):
        shutil.copy(run / name, results / name)
    record = {
        "task": "English constituency parsing, NLTK's 5% WSJ sample (wsj_0001-0199), split by file",
        "command": "python scripts/parsing.py", "splits": counts, "profile": PROFILE.name,
        "model": PROFILE.model, "training": summary,
        "decoding": {"beam_size": BEAM, "alpha": ALPHA, "max_extra": MAX_EXTRA, "checkpoints": used,
                     "minutes": round(decode_minutes, 2)},
        "test": {**{k: round(v, 3) if isinstance(v, float) else v for k, v in scores.items()},
                 "status": dict(status), "coverage": coverage},
        "scoring": "labelled bracket P/R/F1 following evalb's COLLINS.prm (punctuation ignored, ADVP = PRT, "
                   "gold tags put back on predicted trees); all sentence lengths",
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "commit": git_commit(),
        "hardware": hardware(),
    }
    (results / "results.json").write_text(json.dumps(record, indent=1) + "\n")
    print(json.dumps(record, indent=1))


if __name__ == "__main__":
    main()
