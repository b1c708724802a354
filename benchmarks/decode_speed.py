"""Decoding speed on a trained model: the readable decoders (before), the package's (after), CTranslate2.

    .venv/bin/python benchmarks/decode_speed.py --run runs/multi30k-cpu [--threads 2] [--sentences N]
                                                [--out results/decoding/speed.json]

One process, one model (the run's averaged checkpoints, as its profile evaluates it), the same sentences
(the corpus's test split) and the same number of threads for every engine:

  readable + cat     simple_greedy_decode / simple_beam_search with the key/value cache grown by
                     torch.cat, the code before the fast decoders existed
  readable           the same searches with the preallocated cache
  package            greedy_decode / beam_search: finished sentences leave the batch, one host sync a step
  ctranslate2 fp32   the run exported with transformer.deploy
  ctranslate2 int8   the same, weights quantised to 8 bits

For greedy decoding and beam 4 (alpha 0.6, input length + 50) it prints sentences/s, target tokens/s
(sentencepiece pieces of the output plus </s>), sacreBLEU, how many outputs equal the package's, and the
package's speed over each of the others. With --out it writes those numbers as a results record.
"""
import argparse
import contextlib
import importlib
import shutil
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import transformer.decode as decode  # noqa: E402
import transformer.evaluate as evaluate  # noqa: E402
from transformer.corpora import load_split  # noqa: E402
from transformer.run import load_model, run_profile  # noqa: E402
from transformer.runlog import write_record  # noqa: E402


attention = importlib.import_module("transformer.attention")   # the module, not the function of that name


def cat_append(cache, k, v):
    """The cache as it was: every step concatenates, copying the whole prefix."""
    if "k" in cache:
        k, v = torch.cat([cache["k"], k], dim=2), torch.cat([cache["v"], v], dim=2)
    cache["k"], cache["v"] = k, v
    return k, v


@contextlib.contextmanager
def concatenating_cache():
    """The attention layers with the cache as it was (the old cache is no longer in the package)."""
    saved = attention.append_to_cache
    attention.append_to_cache = cat_append
    try:
        yield
    finally:
        attention.append_to_cache = saved


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", default="runs/multi30k-cpu", help="a training run folder")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--sentences", type=int, help="only the first N test sentences")
    parser.add_argument("--beams", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--skip", nargs="*", default=[], help="engines to leave out, e.g. 'readable + cat'")
    parser.add_argument("--out", help="write a results record (JSON) here")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    run = Path(args.run)
    profile = run_profile(run)
    average_last = profile.get("average_last", 1)
    model, vocab, used = load_model(run, average_last)
    corpus = profile.get("corpus", "multi30k")
    pairs = load_split(corpus, "test")[:args.sentences]
    sources, refs = [s for s, _ in pairs], [t for _, t in pairs]
    params = sum(p.numel() for p in model.parameters())
    print(f"{run} ({', '.join(used)}): N={model.cfg.N} d_model={model.cfg.d_model} h={model.cfg.h}, "
          f"{params:,} parameters; {len(sources)} {corpus} test sentences; {args.threads} threads; torch {torch.__version__}")

    # engine: (search, cache)
    engines = {
        "readable + cat": ("readable", concatenating_cache),
        "readable": ("readable", contextlib.nullcontext),
        "package": ("fast", contextlib.nullcontext),
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

    names = [n for n in [*engines, *ct2] if n not in args.skip]
    rows = []
    print(f"{'search':7} {'engine':18} {'sent/s':>8} {'tokens/s':>9} {'BLEU':>6} {'= package':>10} {'package is':>11}")
    for beam in args.beams:
        outputs, seconds = {}, {}
        for name in names:
            translate(name, sources[:16], beam)                     # warm-up: first-call allocations
            start = time.perf_counter()
            outputs[name] = translate(name, sources, beam)
            seconds[name] = time.perf_counter() - start
        for name in names:
            tokens = sum(len(ids) + 1 for ids in vocab.encode(outputs[name]))
            same = sum(a == b for a, b in zip(outputs[name], outputs["package"])) if "package" in outputs else None
            bleu, signature = evaluate.sacre_bleu(outputs[name], refs)
            row = {"search": "greedy" if beam == 1 else f"beam {beam}", "engine": name, "seconds": seconds[name],
                   "sentences_per_s": len(sources) / seconds[name], "target_tokens_per_s": tokens / seconds[name],
                   "bleu": bleu, "equal_to_package": same,
                   "package_speedup": seconds[name] / seconds["package"] if "package" in seconds else None}
            rows.append(row)
            ratio = f"{row['package_speedup']:.2f}x" if row["package_speedup"] else "-"
            print(f"{row['search']:7} {name:18} {row['sentences_per_s']:8.1f} {row['target_tokens_per_s']:9.0f} "
                  f"{row['bleu']:6.2f} {same if same is not None else '-':>10} {ratio:>11}")
    if args.out:
        record = {"run": str(run), "checkpoints": used, "model": {"N": model.cfg.N, "d_model": model.cfg.d_model,
                  "h": model.cfg.h, "parameters": params}, "corpus": corpus, "split": "test", "sentences": len(sources),
                  "threads": args.threads, "alpha": 0.6, "max_extra": 50, "rows": rows,
                  "bleu_signature": signature}
        out = Path(args.out)
        write_record(out, record)
        print(f"wrote {out}")


if __name__ == "__main__":
    main()
