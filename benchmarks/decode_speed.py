"""Decoding speed on a trained model: the readable decoders, the package's, and CTranslate2, side by side.

    .venv/bin/python benchmarks/decode_speed.py [--run results/multi30k-cpu/model.pt] [--threads 2]
                                                [--rounds 3] [--sentences N] [--profile]
                                                [--out results/decoding/speed.json]

One process, one model (the shipped model file by default; a run folder gives its averaged checkpoints, as
its profile evaluates it), the same sentences (the corpus's test split) and the same number of threads for
every engine:

  readable + cat     simple_greedy_decode / simple_beam_search with the key/value cache grown by torch.cat
  readable           the same searches with the preallocated cache
  package            greedy_decode / beam_search: finished sentences leave the batch, one host sync a step
  package, full ranking
                     the package with each step's candidates ranked as before best_extensions: topk over
                     all k * V sums in beam search, argmax over the V logits in greedy search
  ctranslate2 fp32   the model exported with transformer.deploy
  ctranslate2 int8   the same, weights quantised to 8 bits

The machine's speed drifts over minutes, so every engine is timed once per round, the rounds interleaved
(every other round in the reverse order, so that no engine always follows the same one), and each keeps its
fastest round. Each row also gives the package's speed over the engine within each round (two runs minutes
apart are not compared): their median and range, which say how much one round's drift moves the ratio.
For greedy decoding and beam 4 (alpha 0.6, input length + 50) it prints sentences/s, target tokens/s
(sentencepiece pieces of the output plus </s>), sacreBLEU, how many outputs equal the package's, and the
package's speed over each of the others. --profile adds where one beam-4 pass of the package spends its
time, operator by operator (torch.profiler), and in a second pass part by part of the search (a wall clock
around each part's function). With --out it writes those
numbers as a results record.
"""
import argparse
import collections
import contextlib
import importlib
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import transformer.decode as decode  # noqa: E402
import transformer.evaluate as evaluate  # noqa: E402
from transformer.corpora import load_split  # noqa: E402
from transformer.run import REPOSITORY, SHIPPED_MODEL, load_model, run_profile  # noqa: E402
from transformer.runlog import write_record  # noqa: E402


attention = importlib.import_module("transformer.attention")   # the module, not the function of that name


def cat_append(cache, k, v):
    """The cache as it was: every step concatenates, copying the whole prefix."""
    if "k" in cache:
        k, v = torch.cat([cache["k"], k], dim=2), torch.cat([cache["v"], v], dim=2)
    cache["k"], cache["v"] = k, v
    return k, v


def ranked_in_full(scores, logp, n):
    """best_extensions as the searches ranked before it: every one of the k * V sums formed, then topk (beam
    search) or argmax (greedy search, one hypothesis scored 0)."""
    b, k, V = logp.shape
    sums = (scores[:, :, None] + logp).view(b, k * V)
    if n == 1:
        best = sums.argmax(dim=1, keepdim=True)
        return sums.gather(1, best), best
    return sums.topk(n, dim=1)


@contextlib.contextmanager
def replaced(owner, name, value):
    """owner.name is value inside the block (an inherited attribute is inherited again after it)."""
    own, saved = name in vars(owner), getattr(owner, name)
    setattr(owner, name, value)
    try:
        yield
    finally:
        if own:
            setattr(owner, name, saved)
        else:
            delattr(owner, name)


def profile_beam(model, vocab, sources, top=12):
    """One beam-4 pass of the package under torch.profiler: the operators that take the most time (self CPU),
    with the wall time of the pass and the operators' total."""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        start = time.perf_counter()
        decode.translate(model, vocab, sources, beam_size=4, alpha=0.6, max_extra=50, progress=False)
        wall = time.perf_counter() - start
    events = sorted(prof.key_averages(), key=lambda e: -e.self_cpu_time_total)
    total = sum(e.self_cpu_time_total for e in events) / 1e6
    print(f"\nbeam 4, package, under torch.profiler: {wall:.2f} s wall, {total:.2f} s in operators")
    ops = []
    for e in events[:top]:
        ops.append({"op": e.key, "seconds": e.self_cpu_time_total / 1e6, "calls": e.count})
        print(f"  {e.key:45} {ops[-1]['seconds']:7.3f} s {e.count:7d} calls {ops[-1]['seconds'] / total:6.1%}")
    return {"search": "beam 4", "engine": "package", "wall_seconds": wall, "operator_seconds": total, "ops": ops}


# the parts timed within the decoder layers' time (the encoder's attention is the encoder's)
INSIDE_THE_DECODER = ("attention sublayers", "attention kernel")


def profile_parts(model, vocab, sources):
    """One beam-4 pass of the package timed by part of the search: each part's function is wrapped in a wall
    clock where the search calls it (on the CPU an operator returns when its work is done, so the clock holds
    the part's own time). The attention sublayers and the attention kernel are the decoder's, timed inside its
    layers; 'the rest' is the time between the parts: the search's Python, its small tensor operations and the
    one read of each step."""
    from transformer.attention import MultiHeadAttention
    from transformer.embeddings import OutputProjection
    from transformer.layers import Decoder
    seconds, calls = collections.Counter(), collections.Counter()
    decoding = [0]          # > 0 inside the decoder layers

    def timed(part, function):
        # the attention parts count only inside the decoder layers, which say when they are inside
        inside, opens = part in INSIDE_THE_DECODER, part == "decoder layers"

        def clocked(*args, **kwargs):
            if inside and not decoding[0]:
                return function(*args, **kwargs)
            decoding[0] += opens
            start = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                seconds[part] += time.perf_counter() - start
                calls[part] += 1
                decoding[0] -= opens
        return clocked

    # part: (owner, attribute); each class's own function, so that every instance is timed
    parts = {"encoder": (type(model), "encode"),
             "decoder layers": (Decoder, "forward"),
             "attention sublayers": (MultiHeadAttention, "forward"),
             "attention kernel": (torch.nn.functional, "scaled_dot_product_attention"),
             "projection onto the vocabulary": (OutputProjection, "forward"),
             "log-softmax over the vocabulary": (torch.Tensor, "log_softmax"),
             "ranking (best_extensions)": (decode, "best_extensions"),
             "finished hypotheses": (decode._Finished, "add"),
             "next beam": (decode, "_next_beam"),
             "cache following the beam": (type(model), "reorder_cache")}
    with contextlib.ExitStack() as stack:
        for part, (owner, name) in parts.items():
            stack.enter_context(replaced(owner, name, timed(part, getattr(owner, name))))
        start = time.perf_counter()
        decode.translate(model, vocab, sources, beam_size=4, alpha=0.6, max_extra=50, progress=False)
        wall = time.perf_counter() - start
    rest = wall - sum(t for part, t in seconds.items() if part not in INSIDE_THE_DECODER)
    rows = [{"part": part, "seconds": seconds[part], "calls": calls[part],
             "inside_the_decoder_layers": part in INSIDE_THE_DECODER} for part in parts]
    rows.append({"part": "the rest", "seconds": rest, "calls": None, "inside_the_decoder_layers": False})
    print(f"\nbeam 4, package, by part of the search: {wall:.2f} s wall")
    for r in rows:
        inside = " (inside the decoder layers)" if r["inside_the_decoder_layers"] else ""
        print(f"  {r['part']:32} {r['seconds']:7.3f} s {r['seconds'] / wall:6.1%}{inside}")
    return {"wall_seconds": wall, "parts": rows}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", default=str(SHIPPED_MODEL),
                        help="a model file or training run folder (default: the shipped model)")
    parser.add_argument("--corpus", default="multi30k", help="the test sentences' corpus (a run folder's "
                        "profile names its own)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved timings of each engine; the fastest counts")
    parser.add_argument("--profile", action="store_true", help="also profile one beam-4 pass of the package")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--sentences", type=int, help="only the first N test sentences")
    parser.add_argument("--beams", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--skip", nargs="*", default=[], help="engines to leave out, e.g. 'readable + cat'")
    parser.add_argument("--out", help="write a results record (JSON) here")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    run = Path(args.run)
    profile = run_profile(run) if run.is_dir() else {}
    average_last = profile.get("average_last", 1) if run.is_dir() else None
    model, vocab, used = load_model(run, average_last)
    corpus = profile.get("corpus", args.corpus)
    pairs = load_split(corpus, "test")[:args.sentences]
    sources, refs = [s for s, _ in pairs], [t for _, t in pairs]
    params = sum(p.numel() for p in model.parameters())
    print(f"{run} ({', '.join(used)}): N={model.cfg.N} d_model={model.cfg.d_model} h={model.cfg.h}, "
          f"{params:,} parameters; {len(sources)} {corpus} test sentences; {args.threads} threads; torch {torch.__version__}")

    # engine: (search, cache)
    engines = {
        "readable + cat": ("readable", lambda: replaced(attention, "append_to_cache", cat_append)),
        "readable": ("readable", contextlib.nullcontext),
        "package": ("fast", contextlib.nullcontext),
        "package, full ranking": ("fast", lambda: replaced(decode, "best_extensions", ranked_in_full)),
    }
    ct2_dir = Path(tempfile.mkdtemp(prefix="ct2-"))
    try:
        from transformer.deploy import CTranslate2Model, export_ctranslate2
        export_ctranslate2(run, ct2_dir / "fp32", average_last)
        export_ctranslate2(run, ct2_dir / "int8", average_last, quantization="int8")
        ct2 = {"ctranslate2 fp32": CTranslate2Model(ct2_dir / "fp32", args.threads, "float32"),
               "ctranslate2 int8": CTranslate2Model(ct2_dir / "int8", args.threads, "int8")}
    except ImportError:
        print("ctranslate2 is not installed: its rows are left out")
        ct2 = {}
    finally:
        shutil.rmtree(ct2_dir)       # the engine has read the models into memory

    def translate(name, sentences, beam):
        if name in ct2:
            return ct2[name].translate(sentences, beam_size=beam, alpha=0.6, max_extra=50)
        search, cache = engines[name]
        with cache():
            return decode.translate(model, vocab, sentences, beam_size=beam, alpha=0.6, max_extra=50, progress=False,
                                    search=search)

    rows = []
    print(f"{'search':7} {'engine':29} {'sent/s':>8} {'tokens/s':>9} {'BLEU':>6} {'= package':>10} {'package is':>11} "
          f"{'by round (range)':>20}")
    for beam in args.beams:
        names = [n for n in [*engines, *ct2] if n not in args.skip]
        outputs, rounds = {}, {name: [] for name in names}
        for name in names:
            translate(name, sources[:16], beam)                     # warm-up: first-call allocations
        for r in range(args.rounds):
            for name in (names if r % 2 == 0 else names[::-1]):
                start = time.perf_counter()
                outputs[name] = translate(name, sources, beam)
                rounds[name].append(time.perf_counter() - start)
        seconds = {name: min(times) for name, times in rounds.items()}
        for name in names:
            # within each round: the engine's time over the package's
            paired = (sorted(t / p for t, p in zip(rounds[name], rounds["package"]))
                      if "package" in rounds else [])
            tokens = sum(len(ids) + 1 for ids in vocab.encode(outputs[name]))
            same = sum(a == b for a, b in zip(outputs[name], outputs["package"])) if "package" in outputs else None
            bleu, signature = evaluate.sacre_bleu(outputs[name], refs)
            row = {"search": "greedy" if beam == 1 else f"beam {beam}", "engine": name, "seconds": seconds[name],
                   "sentences_per_s": len(sources) / seconds[name], "target_tokens_per_s": tokens / seconds[name],
                   "bleu": bleu, "equal_to_package": same,
                   "package_speedup": seconds[name] / seconds["package"] if "package" in seconds else None,
                   "round_seconds": rounds[name], "paired_speedup": statistics.median(paired) if paired else None,
                   "paired_speedup_range": [paired[0], paired[-1]] if paired else None}
            rows.append(row)
            ratio = f"{row['package_speedup']:.2f}x" if row["package_speedup"] else "-"
            low, high = row["paired_speedup_range"] or (None, None)
            by_round = f"{row['paired_speedup']:.2f}x ({low:.2f}-{high:.2f})" if low else "-"
            print(f"{row['search']:7} {name:29} {row['sentences_per_s']:8.1f} {row['target_tokens_per_s']:9.0f} "
                  f"{row['bleu']:6.2f} {same if same is not None else '-':>10} {ratio:>11} {by_round:>20}")
    ops = profile_beam(model, vocab, sources) if args.profile else None
    if ops:
        ops["by_part"] = profile_parts(model, vocab, sources)
    if args.out:
        # the model as the repository names it, never a path of this machine
        where = run.resolve()
        name = str(where.relative_to(REPOSITORY)) if where.is_relative_to(REPOSITORY) else run.name
        record = {"run": name, "checkpoints": used, "model": {"N": model.cfg.N, "d_model": model.cfg.d_model,
                  "h": model.cfg.h, "parameters": params}, "corpus": corpus, "split": "test", "sentences": len(sources),
                  "threads": args.threads, "rounds": args.rounds, "alpha": 0.6, "max_extra": 50, "rows": rows,
                  "bleu_signature": signature, **({"profile": ops} if ops else {})}
        out = Path(args.out)
        write_record(out, record)
        print(f"wrote {out}")


if __name__ == "__main__":
    main()
