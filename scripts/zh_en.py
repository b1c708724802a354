"""Appendix A's result: the English->Chinese task of a widely read PyTorch tutorial, trained twice.

    python scripts/zh_en.py          # prepares the splits, trains (or resumes) both runs, scores them

1. `zh-en-tutorial`: the tutorial's own split. Training on all 6,834 pairs and testing on its 683
   test pairs, every one of which is a training pair: the score measures memorisation.
2. `zh-en`: our split, with no test sentence in training (transformer.corpora.prepare_zh_en).

Both runs use the same profile (a fixed number of steps), beam 4 and an average of the last 5
checkpoints, and are scored with sacreBLEU's Chinese tokenizer. Results go to results/zh-en/.
"""
import argparse
import json
import shutil
import sys
import time
from pathlib import Path


ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from transformer.corpora import load_split, prepare_zh_en  # noqa: E402
from transformer.evaluate import load_model, translate  # noqa: E402
from transformer.runlog import git_commit, hardware  # noqa: E402
from transformer.train import Profile, train  # noqa: E402

# A small post-norm model with the paper's recipe; P_drop 0.3 set in advance against overfitting 6,000 pairs.
PROFILE = Profile("zh-en", "zh-en", "small", "English->Chinese, 6k pairs, on a 2-core CPU",
                  model={"d_model": 128, "d_ff": 512, "h": 4, "d_k": 32, "d_v": 32, "P_drop": 0.3},
                  vocab_size=8000, max_len=150, clean_ratio=3.0, max_tokens=2000, tokens_per_step=2000,
                  warmup_steps=200, lr_factor=0.3, max_steps=1200, save_every_steps=100, keep_last=5,
                  average_last=5, eval_every=250, amp=False)


def zh_bleu(hyps, refs):
    """sacreBLEU with its Chinese tokenizer (each CJK character is a token): (score, signature)."""
    import sacrebleu
    if len(hyps) != len(refs):
        raise ValueError(f"{len(hyps)} hypotheses but {len(refs)} references")
    metric = sacrebleu.metrics.BLEU(tokenize="zh")
    return metric.corpus_score(hyps, [refs]).score, str(metric.get_signature())


def run(corpus, runs, data_root, profile=PROFILE):
    profile = profile.replace(name=corpus, corpus=corpus)
    out = runs / corpus
    summary = train(profile, out, data_root)
    model, vocab, used = load_model(out, profile.average_last)
    pairs = load_split(corpus, "test", data_root)
    started = time.time()
    hyps = translate(model, vocab, [s for s, _ in pairs], beam_size=4, alpha=0.6)
    bleu, signature = zh_bleu(hyps, [t for _, t in pairs])
    return {"corpus": corpus, "training": summary, "test_sentences": len(pairs), "checkpoints": used,
            "beam_size": 4, "alpha": 0.6, "test_bleu": round(bleu, 2), "signature": signature,
            "translate_seconds": round(time.time() - started, 1)}, hyps


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", default=str(ROOT / "runs" / "zh-en"))
    parser.add_argument("--results", default=str(ROOT / "results" / "zh-en"))
    parser.add_argument("--seed-dir", help="folder holding zh-en-seed/ (default $TRANSFORMER_DATA)")
    args = parser.parse_args()
    runs, results = Path(args.runs), Path(args.results)
    data_root = runs / "data"
    counts = prepare_zh_en(data_root, args.seed_dir)
    record = {"task": "English->Chinese, the PyTorch tutorial's corpus (zh-en-seed)",
              "command": "python scripts/zh_en.py", "splits": counts, "profile": PROFILE.name}
    results.mkdir(parents=True, exist_ok=True)
    for corpus in ("zh-en-tutorial", "zh-en"):
        scores, hyps = run(corpus, runs, data_root)
        record[corpus] = scores
        (results / f"{corpus}.test.zh").write_text("\n".join(hyps) + "\n", encoding="utf-8")
        shutil.copy(runs / corpus / "dev_log.csv", results / f"{corpus}.dev_log.csv")
        shutil.copy(runs / corpus / "train_log.csv", results / f"{corpus}.train_log.csv")
    record.update(date=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), commit=git_commit(),
                  hardware=hardware())
    (results / "results.json").write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n")
    print(json.dumps(record, indent=1, ensure_ascii=False))


if __name__ == "__main__":
    main()
