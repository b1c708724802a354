"""The book's real result: train on Multi30k English->German on this CPU, then translate its test set.

    python scripts/multi30k_cpu.py            # trains (or resumes) runs/multi30k-cpu, then evaluates

Training uses the `multi30k-cpu` profile of transformer.train (a 58-minute time budget); evaluation
averages the last checkpoints and runs beam search (beam 4, alpha 0.6) on test_2016_flickr, scored
with sacreBLEU. Everything the book shows is written to results/multi30k-cpu/: results.json
(metrics, hardware, time, commit, command), the training and dev logs, and the translations.
"""
import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from transformer.evaluate import evaluate_run, load_model, sacre_bleu, translate  # noqa: E402
from transformer.train import cpu_name, get_profile, git_commit, train  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", default=str(ROOT / "runs" / "multi30k-cpu"))
    parser.add_argument("--results", default=str(ROOT / "results" / "multi30k-cpu"))
    parser.add_argument("--data-dir", help="corpus cache directory (default $TRANSFORMER_DATA)")
    args = parser.parse_args()
    run, out = Path(args.run), Path(args.results)
    profile = get_profile("multi30k-cpu")

    summary = train(profile, run, args.data_dir)          # resumes, or returns at once if already done
    started = time.time()
    beam = evaluate_run(run, "test", profile.average_last, beam_size=4, alpha=0.6, data_root=args.data_dir)
    # two comparisons, on the same test set: greedy instead of beam, and the last checkpoint alone
    model, vocab, _ = load_model(run, profile.average_last)
    greedy_hyps = translate(model, vocab, beam["sources"], beam_size=1)
    single, vocab, _ = load_model(run, 1)
    single_hyps = translate(single, vocab, beam["sources"], beam_size=4)
    eval_minutes = (time.time() - started) / 60

    out.mkdir(parents=True, exist_ok=True)
    for name in ("train_log.csv", "dev_log.csv", "profile.json", "run_info.json"):
        shutil.copy(run / name, out / name)
    (out / "translations.de").write_text("\n".join(beam["hypotheses"]) + "\n", encoding="utf-8")
    run_info = json.loads((run / "run_info.json").read_text())
    results = {
        "task": "Multi30k English->German, test_2016_flickr",
        "command": "python scripts/multi30k_cpu.py",
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "commit_training": sorted({r["commit"] for r in run_info if r["commit"]}),
        "commit_evaluation": git_commit(),
        "hardware": {"cpu": cpu_name(), "cores": os.cpu_count(),
                     "torch_threads": torch.get_num_threads(), "torch": torch.__version__,
                     "gpu": None},
        "profile": profile.name,
        "training": summary,
        "evaluation_minutes": round(eval_minutes, 1),
        "test": {k: v for k, v in beam.items() if k not in ("sources", "references", "hypotheses")},
        "test_greedy_sacrebleu": round(sacre_bleu(greedy_hyps, beam["references"])[0], 2),
        "test_last_checkpoint_sacrebleu": round(sacre_bleu(single_hyps, beam["references"])[0], 2),
    }
    (out / "results.json").write_text(json.dumps(results, indent=1, ensure_ascii=False) + "\n")
    print(json.dumps(results, indent=1, ensure_ascii=False))


if __name__ == "__main__":
    main()
