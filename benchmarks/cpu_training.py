"""Training throughput of a CPU profile: tokens/s (source + target, padding excluded) per step.

    .venv/bin/python benchmarks/cpu_training.py [--profile multi30k-cpu] [--steps 30] [--threads 2]

Runs the real training loop (transformer.train.train) for a few steps in a temporary folder and
prints the median tokens/s and seconds per step over the steps after the first few (warm-up).
"""
import argparse
import platform
import statistics
import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from transformer.runlog import read_log  # noqa: E402
from transformer.profiles import get_profile  # noqa: E402
from transformer.train import train  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--profile", default="multi30k-cpu")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    profile = get_profile(args.profile, max_steps=args.steps, max_minutes=None, save_every_steps=10**9,
                          save_every_minutes=None, eval_every=10**9)
    with tempfile.TemporaryDirectory() as tmp:
        summary = train(profile, tmp, progress=False, log=lambda msg: None)
        log = read_log(Path(tmp) / "train_log.csv")
    skip = min(5, args.steps // 3)
    tok = statistics.median(log["tokens_per_s"][skip:])
    sec = statistics.median((log["src_tokens"] + log["tgt_tokens"])[skip:] / log["tokens_per_s"][skip:])
    print(f"profile {profile.name} ({summary['parameters']:,} parameters, ≤{profile.max_tokens} tokens per batch) "
          f"on {platform.machine()} CPU, {args.threads} threads, torch {torch.__version__}")
    print(f"median over steps {skip + 1}-{args.steps}: {tok:.0f} tokens/s, {sec:.2f} s/step")


if __name__ == "__main__":
    main()
