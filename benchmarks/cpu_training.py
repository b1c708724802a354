"""Training throughput of a CPU profile: tokens/s (source + target, padding excluded) per step.

    .venv/bin/python benchmarks/cpu_training.py [--profile multi30k-cpu] [--steps 30] [--threads 2]
    .venv/bin/python benchmarks/cpu_training.py --profile table3-cpu --compare
    .venv/bin/python benchmarks/cpu_training.py --profile table3-epochs --row big --scale 8 --threads 1
    .venv/bin/python benchmarks/cpu_training.py --profile multi30k-cpu --steps 12 --threads 2 --compare \
        --record results/cpu-precision/NAME.json

Runs the real training loop (transformer.train.train) for a few steps in a temporary folder and
prints the median tokens/s and seconds per step over the steps after the first few (warm-up).

--compare measures, in one process and in this order, the trainer as it was (glibc's default allocator
settings, float32), then with freed memory kept in the process (transformer.distributed.keep_freed_memory),
then also with bfloat16 autocast (cpu_bf16=True; only where the CPU has bfloat16 instructions), and
prints each one's speed as a ratio to the first, with the training loss after the same steps (same
seed) beside it. --record writes those rows, with the machine, date, commit and command, as JSON:
chapter 5.2 reads the records in results/cpu-precision/.
"""
import argparse
import platform
import statistics
import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from transformer.distributed import keep_freed_memory  # noqa: E402
from transformer.machine import cpu_has_bf16, cpu_name  # noqa: E402
from transformer.profiles import get_profile  # noqa: E402
from transformer.run import TRAIN_LOG, read_log  # noqa: E402
from transformer.runlog import write_record  # noqa: E402
from transformer.train import train  # noqa: E402


def measure(profile, steps):
    """(median tokens/s, median s/step, loss of the last step) of `steps` training steps."""
    with tempfile.TemporaryDirectory() as tmp:
        summary = train(profile, tmp, progress=False, log=lambda msg: None)
        log = read_log(Path(tmp) / TRAIN_LOG)
    skip = min(5, steps // 3)
    tok = statistics.median(log["tokens_per_s"][skip:])
    sec = statistics.median((log["src_tokens"] + log["tgt_tokens"])[skip:] / log["tokens_per_s"][skip:])
    return tok, sec, float(log["loss"][-1]), summary


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--profile", default="multi30k-cpu")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--row", help="a Table 3 row: the profile with that row's model (transformer.variations)")
    parser.add_argument("--scale", type=int, default=8, help="the row's widths divided by this (with --row)")
    parser.add_argument("--compare", action="store_true",
                        help="the default allocator and float32, against the kept memory and bfloat16")
    parser.add_argument("--record", help="with --compare: write the measurements to this JSON file")
    args = parser.parse_args()
    if args.record and not args.compare:
        parser.error("--record keeps the rows of --compare: add --compare")
    torch.set_num_threads(args.threads)
    profile = get_profile(args.profile, max_steps=args.steps, max_minutes=None, save_every_steps=10**9,
                          save_every_minutes=None, eval_every=10**9, amp=False)
    if args.row:
        from transformer.variations import row_profile
        profile = row_profile(args.row, 1, profile, args.scale)
    print(f"profile {profile.name}, ≤{profile.max_tokens} tokens per batch, on {cpu_name()} ({platform.machine()}), "
          f"{args.threads} threads, torch {torch.__version__}, bfloat16 instructions: {cpu_has_bf16()}")
    if not args.compare:
        tok, sec, _, summary = measure(profile, args.steps)
        print(f"{summary['parameters']:,} parameters; median over steps after the warm-up: {tok:.0f} tokens/s, "
              f"{sec:.2f} s/step")
        return
    rows = [("as before (default allocator, float32)", profile, None)]
    rows.append(("freed memory kept in the process", profile, keep_freed_memory))
    if cpu_has_bf16():
        rows.append(("kept memory + bfloat16 autocast", profile.replace(cpu_bf16=True), None))
    first, measured = None, []
    for name, prof, setup in rows:
        if setup is not None and not setup():
            print(f"{name}: not available here (needs glibc)")
            continue
        tok, sec, loss, _ = measure(prof, args.steps)
        first = first or tok
        print(f"{name:40} {tok:7.0f} tokens/s  {sec:5.2f} s/step  x{tok / first:4.2f}  "
              f"loss after {args.steps} steps {loss:.3f}")
        measured.append({"setting": name, "tokens_per_s": round(tok), "s_per_step": round(sec, 3),
                         "speed_vs_first": round(tok / first, 3), "loss": round(loss, 4)})
    if args.record:
        write_record(args.record, {"profile": profile.name, "steps": args.steps, "threads": args.threads,
                                   "cpu_bf16_instructions": cpu_has_bf16(), "rows": measured})
        print(f"record: {args.record}")


if __name__ == "__main__":
    main()
