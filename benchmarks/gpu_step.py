"""WMT-shaped training steps on a GPU: ours (transformer.step.train_step) against torch.nn.Transformer.

    .venv/bin/python benchmarks/gpu_step.py                    # base and big, bf16 autocast, torch.compile
    .venv/bin/python benchmarks/gpu_step.py --presets base --no-compile --steps 20
    .venv/bin/python benchmarks/gpu_step.py --smoke            # the CPU, tiny shapes, seconds: checks the script

Data: the WMT news test sets (transformer's `wmt-news` corpus, ~25k pairs; $TRANSFORMER_DATA, else the
offline copy in ../shared/data), cleaned (length ratio 1.5) and encoded with one joint BPE of --vocab pieces
(37000, the paper's; if the text supports fewer, the largest it supports: the script says which), pairs
longer than the profile's max_len dropped. Steps are drawn as the trainer's StepFeeder draws them on one
device: each step is the next batch of <= tokens_per_step padded tokens (either side) of a
transformer.data.BatchStream, in its order, cut by split_batch into micro-batches of <= max_tokens padded
tokens that train_step accumulates, with tokens_per_step and max_tokens of
transformer.profiles.PROFILES['wmt14-<preset>'] (base: 25000 in micro-batches of <= 12500, usually 2; big:
25000 in micro-batches of <= 6250, usually 4). Every variant runs the same steps.

Variants, each on its own (built, warmed up, timed, freed in turn, so that peak memory is its own):
- ours: train_step on Transformer(cfg, V) with validate_ids off, the optimizer of build_optimizer (fused
  Adam on CUDA), bf16 autocast inside train_step (where the GPU supports bf16), torch.compile(dynamic=True)
  as the trainer's --compile does;
- reference: torch.nn.Transformer with the same config, embeddings, positions and tied output layer
  (benchmarks/train_step.py's TorchReference), F.cross_entropy(label_smoothing) on float32 logits outside
  autocast, torch.optim.Adam(fused=True), the same schedule, autocast and compile.

Timing: a warm-up pass over the timed steps (compilation, allocator, Adam state), then --steps timed steps;
on CUDA the timed region is bracketed by torch.cuda.synchronize() and measured with CUDA events (and the
host clock). Printed for each: seconds per step, non-pad target tokens per second, model FLOPs
utilisation (MFU), peak memory, and the projected wall-clock of the profile's schedule (100k steps for
base, 300k for big) = mean seconds per step x max_steps, plus the same projection for steps holding
exactly tokens_per_step (25000) non-pad target tokens. MFU = analytic model FLOPs per step / seconds per
step / the bf16 matmul rate measured on the same device in the same run (8192^3 matmuls back to back,
timed with CUDA events). Model FLOPs are counted analytically on the non-pad tokens (see model_flops): 3 x the forward's
matmul FLOPs (every weight matrix, the output projection included, and the attention products
Q K^T and A V, full T x T for the causal self-attention); embedding lookups, biases, norms and softmax
are not counted. --smoke runs the same code on the CPU at tiny shapes and labels every number as CPU.
"""
import argparse
import gc
import json
import platform
import resource
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))   # the repository: transformer/, benchmarks/
from benchmarks.train_step import (TorchReference, cpu_fused_adam_supported, encoded_corpus,  # noqa: E402
                                   reference_loss, reference_optimizer, reference_step)
from transformer.machine import cpu_name  # noqa: E402
from transformer.data import PAD  # noqa: E402
from transformer.model import Transformer, TransformerConfig  # noqa: E402
from transformer.optim import build_optimizer  # noqa: E402
from transformer.loss import label_smoothed_nll  # noqa: E402
from transformer.distributed import Runtime  # noqa: E402
from transformer.profiles import PROFILES  # noqa: E402
from transformer.step import StepFeeder, train_step, training_stream  # noqa: E402
from transformer.train import compiled  # noqa: E402


def model_flops(cfg, vocab, src_lengths, tgt_lengths):
    """Training FLOPs (forward + backward = 3 x forward) of one batch of sentences with these non-pad lengths.

    Counts every matrix product: the attention projections and feed-forward layers of each encoder layer
    per source token, of each decoder layer per target token (plus the encoder-decoder attention's key and
    value projections of the memory, per source token), the output projection (2 d_model V per target
    token), and the attention products Q K^T and A V per sentence (S^2, T^2 in full, T S). A product of
    [m, k] by [k, n] is 2 m k n FLOPs; its backward is twice that.
    """
    d, d_ff, N = cfg.d_model, cfg.d_ff, cfg.N
    hk, hv = cfg.h * cfg.d_k, cfg.h * cfg.d_v
    s = np.asarray(src_lengths, dtype=np.float64)
    t = np.asarray(tgt_lengths, dtype=np.float64)
    S, T = s.sum(), t.sum()
    self_attn = d * (2 * hk + hv) + hv * d          # W^Q, W^K, W^V and W^O
    ffn = 2 * d * d_ff
    encoder = N * (2 * S * (self_attn + ffn) + 2 * (s * s).sum() * (hk + hv))
    decoder = N * (2 * T * (self_attn + d * hk + hv * d + ffn)     # self-attention, cross W^Q and W^O, FFN
                   + 2 * S * d * (hk + hv)                          # cross-attention W^K, W^V on the memory
                   + 2 * (t * t).sum() * (hk + hv) + 2 * (s * t).sum() * (hk + hv))
    output = 2 * T * d * vocab
    return 3.0 * (encoder + decoder + output)


class Clock:
    """Marks and intervals: CUDA events on a GPU (after synchronising), the host clock on the CPU."""

    def __init__(self, device):
        self.device, self.cuda = device, device.type == "cuda"

    def sync(self):
        if self.cuda:
            torch.cuda.synchronize(self.device)

    def mark(self):
        if self.cuda:
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            return event
        return time.perf_counter()

    def seconds(self, a, b):
        return a.elapsed_time(b) / 1000.0 if self.cuda else b - a


def matmul_rate(device, dtype, n, reps=10, rounds=3):
    """FLOP/s of n x n x n matmuls in dtype on the device: `reps` back to back, best of `rounds`, after warm-up."""
    clock = Clock(device)
    a = torch.randn(n, n, device=device).to(dtype)
    b = torch.randn(n, n, device=device).to(dtype)
    for _ in range(3):
        a @ b
    best = float("inf")
    for _ in range(rounds):
        clock.sync()
        start = clock.mark()
        for _ in range(reps):
            a @ b
        end = clock.mark()
        clock.sync()
        best = min(best, clock.seconds(start, end) / reps)
    return 2.0 * n ** 3 / best


def profile_for(preset):
    """The training profile whose batches a preset is timed with (wmt14-base for presets without one)."""
    return PROFILES.get(f"wmt14-{preset}", PROFILES["wmt14-base"])


def build_steps(encoded, profile, steps, vocab, device):
    """`steps` optimizer steps drawn by the trainer's own StepFeeder on one device (ids checked on the host).

    Without shape classes a step is the next batch of <= tokens_per_step padded tokens of a BatchStream,
    cut by split_batch into micro-batches of <= max_tokens padded tokens; with them (profile.batch_pad_to,
    on by default for a compiled step) a group of micro-batches of one shape class each (chapter 5.1).
    Returns dicts with the on-device micro-batches, their non-pad lengths and the step's token counts.
    """
    feeder = StepFeeder(encoded, training_stream(encoded, profile), profile.max_tokens, Runtime(), vocab,
                        profile.seed, prefetch=False, tokens_per_step=profile.tokens_per_step)
    out = []
    for step in range(steps):
        item = feeder.build(step)
        lengths = [((src != PAD).sum(1), (tgt_out != PAD).sum(1)) for src, _, tgt_out in item.batches]
        out.append(dict(
            batches=[tuple(t.to(device) for t in b) for b in item.batches], seeds=item.seeds,
            src_lengths=[s[s > 0].numpy() for s, _ in lengths], tgt_lengths=[t[t > 0].numpy() for _, t in lengths],
            shapes=[tuple(b[0].shape) + tuple(b[1].shape[1:]) for b in item.batches],
            n_src=item.n_src, n_tgt=item.n_tgt))
    return out


def graphs_compiled():
    """Graphs dynamo has compiled so far in this process (every compilation and recompilation)."""
    return torch._dynamo.utils.counters["stats"]["unique_graphs"]


def top_kernels(step, steps, device, rows):
    """A profiler table of the `rows` operations with the most time of their own over the steps (device
    time on a GPU)."""
    activities = [torch.profiler.ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    with torch.profiler.profile(activities=activities) as prof:
        for s in steps:
            step(s)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
    key = "self_device_time_total" if device.type == "cuda" else "self_cpu_time_total"
    return prof.key_averages().table(sort_by=key, row_limit=rows)


def run_variant(name, cfg, vocab, steps, device, args, compile_backend, profile_rows=0):
    """Build one variant, warm it up over the steps, time them; returns its measurements."""
    clock = Clock(device)
    rt = Runtime(rank=0, world=1, device=device)
    amp = not args.no_amp and device.type == "cuda"    # bfloat16 on a GPU; the CPU smoke run stays float32
    bf16 = amp and device.type == "cuda" and torch.cuda.is_bf16_supported()
    torch.manual_seed(0)
    if name == "ours":
        model = Transformer(cfg, vocab)
        model.validate_ids = False       # ids are checked on the host; no device sync in the step
        model.to(device)
        optimizer, scheduler = build_optimizer(model, cfg.d_model)     # fused Adam when on CUDA
    else:
        model = TorchReference(cfg, vocab).to(device)
        fused = device.type == "cuda" or cpu_fused_adam_supported()
        optimizer, scheduler = reference_optimizer(model, cfg, fused=fused or None)
    model.train()
    net, loss_fn = model, label_smoothed_nll if name == "ours" else reference_loss
    if compile_backend:          # as the trainer's --compile: the model and the loss, dynamic shapes, no duck sizing
        torch._dynamo.reset()
        net = compiled(model, backend=compile_backend)
        loss_fn = compiled(loss_fn, backend=compile_backend)
    autocast = (lambda: torch.autocast("cuda", dtype=torch.bfloat16)) if bf16 else None

    def step(s):
        if name == "ours":       # with the trainer's per-micro-batch dropout seeds
            return train_step(net, optimizer, scheduler, s["batches"], s["n_tgt"], cfg.eps_ls, PAD, rt, amp=amp,
                              seeds=s["seeds"], loss_fn=loss_fn)
        return reference_step(net, optimizer, scheduler, s["batches"], s["n_tgt"], cfg.eps_ls, PAD, autocast,
                              loss_fn)

    graphs_before = graphs_compiled()
    warmup_step_s = []
    for s in steps:                      # warm-up: compilation for these shapes, allocator, Adam state
        t0 = time.perf_counter()
        step(s)
        clock.sync()
        warmup_step_s.append(time.perf_counter() - t0)
    warmup_s = sum(warmup_step_s)
    graphs_warmup = graphs_compiled() - graphs_before
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    results = []
    clock.sync()
    host_start = time.perf_counter()
    marks = [clock.mark()]
    for s in steps:
        results.append(step(s))
        marks.append(clock.mark())
    clock.sync()
    host_s = time.perf_counter() - host_start
    graphs_timed = graphs_compiled() - graphs_before - graphs_warmup     # a recompilation while timed
    kernels = top_kernels(step, steps[:3], device, profile_rows) if profile_rows else None
    step_s = [clock.seconds(a, b) for a, b in zip(marks, marks[1:])]
    peak = torch.cuda.max_memory_allocated(device) if device.type == "cuda" else None
    losses = torch.stack([torch.as_tensor(r).reshape(-1)[0].float() for r in results]).cpu()
    if not torch.isfinite(losses).all():
        raise RuntimeError(f"{name}: non-finite loss in the timed steps: {losses.tolist()}")
    adam = optimizer.defaults
    info = dict(name=name, step_s=step_s, total_s=sum(step_s), host_s=host_s, warmup_s=warmup_s, peak=peak,
                warmup_step_s=warmup_step_s, graphs_warmup=graphs_warmup, graphs_timed=graphs_timed,
                top_kernels=kernels,
                params=sum(p.numel() for p in model.parameters()),
                adam="fused" if adam.get("fused") else "foreach" if adam.get("foreach") else "for-loop",
                loss_per_token=float(losses[-1]) / steps[-1]["n_tgt"])
    del net, model, optimizer, scheduler, results, loss_fn
    if compile_backend:
        torch._dynamo.reset()        # compiled code and guards let go of this model
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return info


def fmt_hours(seconds):
    return f"{seconds / 3600:.1f} h"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--presets", nargs="+", default=["base", "big"])
    ap.add_argument("--vocab", type=int, default=37000, help="joint BPE pieces = model vocabulary")
    ap.add_argument("--steps", type=int, default=10, help="timed optimizer steps per variant (after a warm-up pass)")
    ap.add_argument("--pairs", type=int, help="use only the first n cleaned training pairs (default: all)")
    ap.add_argument("--no-compile", action="store_true", help="run eagerly (default: torch.compile, dynamic shapes)")
    ap.add_argument("--compile-backend", default="inductor")
    ap.add_argument("--no-amp", action="store_true", help="float32 (TF32 matmuls) instead of bf16 autocast")
    ap.add_argument("--no-reference", action="store_true", help="time ours only")
    ap.add_argument("--matmul-size", type=int, default=8192, help="n of the n x n x n matmul that measures peak")
    ap.add_argument("--device", help="default: cuda if available (--smoke: cpu)")
    ap.add_argument("--threads", type=int, help="CPU threads (default: torch's)")
    ap.add_argument("--pad-to", type=int, help="shape classes of the batches (chapter 5.1): pad lengths to a "
                    "multiple of this; 0: none (default: the trainer's, 8 when compiled, none when eager)")
    ap.add_argument("--profile-top", type=int, default=0, metavar="N",
                    help="after timing, profile 3 steps of ours and print the N costliest operations")
    ap.add_argument("--json", help="also write every measurement to this JSON file")
    ap.add_argument("--smoke", action="store_true",
                    help="CPU check in seconds: tiny preset, 1000-piece BPE on 3000 pairs, 2 steps of 2 x 512 "
                         "tokens, compile backend 'eager', fp32")
    args = ap.parse_args(argv)

    if args.smoke:
        args.presets, args.vocab, args.steps = ["tiny"], 1000, 2
        args.pairs = args.pairs or 3000
        args.matmul_size = 256
        args.compile_backend = "eager"
        device = torch.device(args.device or "cpu")
    else:
        device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    if device.type == "cuda":
        if not torch.cuda.is_available():
            ap.error(f"--device {device}: this machine has no CUDA GPU")
        if device.index is None:        # torch.cuda.set_device and the memory statistics want an index
            device = torch.device("cuda", torch.cuda.current_device())
    if args.threads:
        torch.set_num_threads(args.threads)
    cuda = device.type == "cuda"
    if cuda:
        torch.cuda.set_device(device)
        torch.set_float32_matmul_precision("high")      # as the trainer: TF32 where it runs in float32
    bf16 = cuda and not args.no_amp and torch.cuda.is_bf16_supported()
    precision = "bf16 autocast" if bf16 else "fp32 (TF32 matmuls)" if cuda else "fp32"
    compile_backend = None if args.no_compile else args.compile_backend

    if cuda:
        where = (f"device: {torch.cuda.get_device_name(device)} ({device}), torch {torch.__version__}, "
                 f"CUDA {torch.version.cuda}")
    else:
        where = (f"device: CPU ({cpu_name()}, {platform.machine()}), {torch.get_num_threads()} threads, "
                 f"torch {torch.__version__}" + (" -- smoke run: CPU numbers at tiny shapes" if args.smoke else ""))
    print(where)
    print(f"precision: {precision}; torch.compile: {compile_backend or 'off'}")

    t0 = time.perf_counter()
    max_len = max(profile_for(p).max_len for p in args.presets)
    vocab_obj, encoded = encoded_corpus("wmt-news", args.vocab, max_len, args.pairs,
                                        clean_ratio=profile_for(args.presets[0]).clean_ratio)
    V = len(vocab_obj)
    print(f"data: WMT news test sets, {len(encoded)} pairs, joint BPE of {V} pieces"
          f"{'' if V == args.vocab else f' (asked for {args.vocab}: the largest the text supports)'} "
          f"({time.perf_counter() - t0:.1f} s)")

    mm_dtype = torch.bfloat16 if bf16 else torch.float32
    rate = matmul_rate(device, mm_dtype, args.matmul_size)
    label = "CPU " if not cuda else ""
    mm_name = str(mm_dtype).replace("torch.", "") + (" (TF32)" if cuda and mm_dtype == torch.float32 else "")
    print(f"measured {label}matmul rate: {rate / 1e12:.3f} TFLOP/s ({mm_name}, {args.matmul_size}^3)")

    report = dict(device=where, torch=torch.__version__, precision=precision, compile=compile_backend or "off",
                  matmul_tflops=rate / 1e12, data_pairs=len(encoded), vocab=V, steps=args.steps, presets={})
    for preset in args.presets:
        profile = profile_for(preset).replace(compile=compile_backend is not None, pad_to=args.pad_to)
        if args.smoke:
            profile = profile.replace(max_tokens=512, tokens_per_step=1024)
        cfg = TransformerConfig.preset(preset)
        steps = build_steps(encoded, profile, args.steps, V, device)
        shapes = {shape for s in steps for shape in s["shapes"]}
        micro = statistics.mean(len(s["batches"]) for s in steps)
        n_tgt = statistics.mean(s["n_tgt"] for s in steps)
        n_src = statistics.mean(s["n_src"] for s in steps)
        flops = statistics.mean(sum(model_flops(cfg, V, sl, tl) for sl, tl in zip(s["src_lengths"], s["tgt_lengths"]))
                                for s in steps)
        print(f"\n{label}preset {preset} (N={cfg.N} d_model={cfg.d_model} d_ff={cfg.d_ff} h={cfg.h} "
              f"P_drop={cfg.P_drop}); steps of profile {profile.name} as the trainer draws them on one device: a batch "
              f"of <= {profile.tokens_per_step} padded tokens (tokens_per_step) cut into micro-batches of <= "
              f"{profile.max_tokens} (max_tokens), {micro:.1f} per step on average; mean {n_tgt:.0f} target + "
              f"{n_src:.0f} source non-pad tokens per step; {args.steps} timed steps after a warm-up pass over them; "
              f"shape classes: {f'pad_to {profile.batch_pad_to}' if profile.batch_pad_to else 'none'}, "
              f"{len(shapes)} distinct micro-batch shapes in these steps")
        print(f"model FLOPs per step (analytic, non-pad tokens): {flops / 1e12:.4f} TFLOP")
        names = ["ours"] + ([] if args.no_reference else ["reference"])
        rows = {}
        for name in names:
            r = run_variant(name, cfg, V, steps, device, args, compile_backend,
                            args.profile_top if name == "ours" else 0)
            per_step = r["total_s"] / len(steps)
            r.update(per_step=per_step, tps=n_tgt / per_step, mfu=flops / per_step / rate)
            rows[name] = r
        sched, full_col = f"{profile.max_steps // 1000}k steps", f"@{profile.tokens_per_step} tgt"
        print(f"{'variant':11}{'params':>12}{'adam':>10}{'s/step':>10}{'median':>10}{'target tok/s':>14}"
              f"{'MFU':>8}{'peak mem':>12}{sched:>12}{full_col:>13}")
        for name, r in rows.items():
            peak = f"{r['peak'] / 2**30:.2f} GiB" if r["peak"] is not None else "n/a (CPU)"
            full = profile.tokens_per_step / r["tps"] * profile.max_steps
            print(f"{name:11}{r['params']:>12,}{r['adam']:>10}{r['per_step']:>10.4f}{statistics.median(r['step_s']):>10.4f}"
                  f"{r['tps']:>14.0f}{100 * r['mfu']:>7.1f}%{peak:>12}{fmt_hours(r['per_step'] * profile.max_steps):>12}"
                  f"{fmt_hours(full):>13}")
        for name, r in rows.items():
            print(f"{label}{name}: target tokens/s {r['tps']:.0f}; MFU {100 * r['mfu']:.1f}%; "
                  f"projected {profile.max_steps} steps: {fmt_hours(r['per_step'] * profile.max_steps)} "
                  f"(timed host clock {r['host_s']:.2f} s for {len(steps)} steps; warm-up {r['warmup_s']:.1f} s; "
                  f"last loss/token {r['loss_per_token']:.3f})")
        for name, r in rows.items():
            if compile_backend:
                print(f"{label}{name}: graphs compiled during the warm-up {r['graphs_warmup']}, during the timed "
                      f"steps {r['graphs_timed']}; warm-up step seconds "
                      f"{', '.join(f'{t:.1f}' for t in r['warmup_step_s'])}")
            if r["top_kernels"]:
                print(f"{label}{name}: the costliest operations over 3 steps\n{r['top_kernels']}")
        if "reference" in rows:
            print(f"{label}ours/reference: {rows['ours']['tps'] / rows['reference']['tps']:.2f}x target tokens/s")
        report["presets"][preset] = dict(
            profile=profile.name, pad_to=profile.batch_pad_to, shapes=sorted(shapes), micro_per_step=micro,
            tgt_tokens_per_step=n_tgt, src_tokens_per_step=n_src, flops_per_step=flops, max_steps=profile.max_steps,
            variants={name: {k: r[k] for k in ("params", "adam", "per_step", "step_s", "tps", "mfu", "peak",
                                               "warmup_s", "warmup_step_s", "graphs_warmup", "graphs_timed",
                                               "top_kernels", "loss_per_token")} for name, r in rows.items()})
        if args.json:           # after every preset, so that a run cut off later keeps what it measured
            Path(args.json).parent.mkdir(parents=True, exist_ok=True)
            Path(args.json).write_text(json.dumps(report, indent=1) + "\n")
    if not cuda:
        peak_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20   # KiB on Linux
        print(f"\nCPU process peak resident memory: {peak_rss:.2f} GiB (all variants together)")
    print("projection: mean seconds per timed step x the profile's max_steps; '@N tgt': the same for steps "
          "holding exactly tokens_per_step non-pad target tokens")
    if args.json:
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
