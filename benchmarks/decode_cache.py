"""Decoding with the key/value cache versus recomputing the prefix: same model, same inputs.

    .venv/bin/python benchmarks/decode_cache.py [--threads 2] [--run runs/multi30k-cpu]

Prints sentences/s both ways and their ratio for several output lengths, for greedy decoding and beam
search (beam 4), and checks that both ways produce identical outputs. Outputs are forced to a fixed
length by an end token the model never produces, so every sentence runs to input length + max_extra.
With --run, the trained model of that run is used instead of an untrained `small` one.
"""
import argparse
import platform
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from transformer import Transformer, TransformerConfig, beam_search, greedy_decode  # noqa: E402


def timed(fn, repeats):
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--run", help="a training run folder; its averaged model is used")
    parser.add_argument("--sentences", type=int, nargs="+", default=[32, 128],
                        help="batch sizes to measure (translate() batches ~80 sentences x beam 4)")
    parser.add_argument("--src-len", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    if args.run:
        from transformer.run import load_model
        model, vocab, _ = load_model(args.run, 1)
        V = len(vocab)
    else:
        V = 8000
        model = Transformer(TransformerConfig.preset("small"), V).eval()
    print(f"{platform.machine()} CPU, {args.threads} threads, torch {torch.__version__}; model N={model.cfg.N} "
          f"d_model={model.cfg.d_model}, vocabulary {V}; sources of {args.src_len} tokens")
    print(f"{'batch':>6} {'search':8}{'output length':>15}{'recompute sent/s':>18}{'cached sent/s':>15}{'speed-up':>10}")
    for n in args.sentences:
        src = torch.randint(4, V, (n, args.src_len))
        for name, decode, extras in (("greedy", greedy_decode, (20, 40, 60)), ("beam 4", beam_search, (40,))):
            for extra in extras:
                out_len = args.src_len + extra
                eos = -1 if decode is greedy_decode else 3   # greedy: never stop, so every output has out_len
                run = lambda use_cache: decode(model, src, 2, eos, max_extra=extra, use_cache=use_cache)
                t_plain, out_plain = timed(lambda: run(False), args.repeats)
                t_cache, out_cache = timed(lambda: run(True), args.repeats)
                assert torch.equal(out_plain, out_cache), "cache changed the output"
                length = out_len if decode is greedy_decode else f"<= {out_len}"
                print(f"{n:>6} {name:8}{length:>15}{n / t_plain:18.1f}{n / t_cache:15.1f}{t_plain / t_cache:9.1f}x")


if __name__ == "__main__":
    main()
