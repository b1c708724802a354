"""Appendix B's seed study: the digits Vision Transformer trained with several seeds.

    python scripts/vision.py               # 5 seeds, about half a minute each on a 2-core CPU

One run of 40 epochs on 1,437 images ends a few points of accuracy away from the next: the seed
decides the initial weights and the batch order, and the CPU's kernels decide how sums are
rounded. The appendix draws its conclusion (above or below logistic regression) from this record,
not from its single live run. Each seed trains exactly as the page does (transformer.vision:
the same split, DIGITS_CONFIG, train_classifier) and is written to results/vision/results.json as
soon as it ends, so a killed study resumes with the seeds it has not run yet. A record made by
other settings or another kernel path is refused rather than extended.
"""
import argparse
import json
import sys
import time
from dataclasses import asdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
import torch  # noqa: E402

from transformer.train import git_commit, hardware  # noqa: E402
from transformer.vision import (DIGITS, DIGITS_CONFIG, VisionTransformer, accuracy,  # noqa: E402
                                baseline_accuracy, digits_split, train_classifier)

EPOCHS, BATCH = 40, 64


def settings():
    """What a run depends on; a record made with other settings cannot be extended."""
    return {"epochs": EPOCHS, "batch_size": BATCH, "config": asdict(DIGITS_CONFIG),
            "kernel_path": torch.backends.cpu.get_cpu_capability()}


def one_run(seed, data):
    X_train, y_train, X_test, y_test = data
    torch.manual_seed(seed)
    model = VisionTransformer(DIGITS_CONFIG, **DIGITS)
    started = time.time()
    train_classifier(model, X_train, y_train, EPOCHS, BATCH,
                     warmup_steps=2 * -(-len(X_train) // BATCH))
    return {"seed": seed, "test_accuracy": accuracy(model, X_test, y_test),
            "minutes": round((time.time() - started) / 60, 2)}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--out", default=str(ROOT / "results" / "vision" / "results.json"))
    args = parser.parse_args(argv)
    out = Path(args.out)
    record = {"task": "Appendix B: Vision Transformer on scikit-learn's 8x8 digits, seed study",
              "command": "python scripts/vision.py", "runs": [], **settings()}
    if out.exists():
        try:
            old = json.loads(out.read_text())
        except json.JSONDecodeError as err:
            raise SystemExit(f"{out} is not a results record ({err}); move it away to start again")
        changed = {k: (old.get(k), v) for k, v in settings().items() if old.get(k) != v}
        if changed:
            raise SystemExit(f"{out} was made with other settings {changed}; move it away to start again")
        record["runs"] = old["runs"]
    data = digits_split()
    record["baseline_accuracy"] = baseline_accuracy(*data)
    done = {r["seed"] for r in record["runs"]}
    out.parent.mkdir(parents=True, exist_ok=True)
    for seed in args.seeds:
        if seed in done:
            continue
        run = one_run(seed, data)
        print(f"seed {seed}: test accuracy {run['test_accuracy']:.3f} in {run['minutes']:.1f} min", flush=True)
        record["runs"] = sorted(record["runs"] + [run], key=lambda r: r["seed"])
        record.update(date=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), commit=git_commit(),
                      hardware=hardware())
        tmp = out.with_suffix(".tmp")
        tmp.write_text(json.dumps(record, indent=1) + "\n")
        tmp.replace(out)          # a kill never leaves half a record
    print(json.dumps(record, indent=1))


if __name__ == "__main__":
    main()
