"""A whole training step on the CPU, ours against torch.nn.Transformer: same config, batches and threads.

    .venv/bin/python benchmarks/train_step.py [--preset base] [--vocab 37000] [--threads 2] [--rounds 3]
    .venv/bin/python benchmarks/train_step.py --preset tiny --vocab 1000 --rounds 1 --bpe-pairs 2000   # seconds
    .venv/bin/python benchmarks/train_step.py --dropout 0 --ours-fused-adam   # equal dropout work; fused Adam for ours

A step is forward, label-smoothed loss, backward and an Adam(0.9, 0.98, 1e-9) step with the warmup schedule.
- ours: transformer.step.train_step, the function the trainer runs, on Transformer(cfg, V) with
  validate_ids off and the optimizer and scheduler of transformer.optim.build_optimizer;
- reference: torch.nn.Transformer with the same N, d_model, d_ff, h, dropout, post-norm (no final norms) and
  batch_first, its own embedding scaled by sqrt(d_model) plus the same sinusoidal positions and embedding
  dropout, an output Linear tied to the embedding (so both have the same parameters, counted and printed),
  F.cross_entropy(label_smoothing, ignore_index=pad, reduction="sum") / target tokens, and torch.optim.Adam
  (default implementation; again with fused=True where this torch supports it on the CPU) with the same
  warmup schedule.
nn.Transformer also drops attention weights and the feed-forward hidden layer, which the paper's model does
not: `--dropout 0` compares the two without any dropout.

The batches are real: WMT news sentence pairs encoded with a joint BPE of --vocab pieces (the largest the
text supports, if smaller; printed), bucketed by token count as the trainer does (transformer.data.
token_batches); --batches of them are taken at evenly spaced quantiles of their length, so short, middle
and long sentences all appear. Every variant runs the same batches as the same steps, with the same thread
count, in one process. After --warmup steps each, the variants alternate in rounds (the order rotates
every round); a round runs every batch as one step. Printed: median seconds per step, median over rounds of
non-pad target tokens per second (and source + target) with its range over the rounds, and the ratio
ours / reference. The base preset at 37000 takes about 2-3 minutes on 2 idle cores; on a machine where
other work competes for the cores, 2 OpenMP threads slow down several-fold and unevenly: look at the range.
"""
import argparse
import copy
import math
import os
import platform
import re
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
_SHARED = ROOT.parent / "shared" / "data"   # the offline corpora beside the repository, as tests/conftest.py
if "TRANSFORMER_DATA" not in os.environ and _SHARED.is_dir():
    os.environ["TRANSFORMER_DATA"] = str(_SHARED)

from transformer import data as tdata  # noqa: E402
from transformer.model import Transformer, TransformerConfig  # noqa: E402
from transformer.optim import build_optimizer, rate  # noqa: E402
from transformer.positional import sinusoidal_table  # noqa: E402
from transformer.distributed import Runtime  # noqa: E402
from transformer.machine import cpu_name  # noqa: E402
from transformer.step import train_step  # noqa: E402

from transformer.corpora import load_split  # noqa: E402

PAD = tdata.PAD


# ----------------------------------------------------------------------------------------------- data

def train_vocab(pairs, vocab_size, log=print):
    """Joint BPE of vocab_size pieces, or of the largest size the text supports (sentencepiece says which)."""
    try:
        return tdata.train_vocab(pairs, vocab_size)
    except RuntimeError as err:
        match = re.search(r"<=\s*(\d+)", str(err))
        if "too high" not in str(err) or not match:
            raise
        log(f"note: the text supports at most {match.group(1)} BPE pieces, not {vocab_size}; using that")
        return tdata.train_vocab(pairs, int(match.group(1)))


def encoded_corpus(corpus, vocab_size, max_len, bpe_pairs=None, clean_ratio=1.5, log=print):
    """(Vocab, ParallelData) of a corpus's training split: cleaned, joint BPE, pairs longer than max_len dropped."""
    pairs, _ = tdata.clean_pairs(load_split(corpus, "train"), max_ratio=clean_ratio)
    if bpe_pairs:
        pairs = pairs[:bpe_pairs]
    vocab = train_vocab(pairs, vocab_size, log)
    encoded, _ = tdata.encode_pairs(vocab, pairs, max_len)
    return vocab, encoded


def quantile_batches(encoded, max_tokens, count, seed=0):
    """`count` token-count batches (as the trainer builds them) at evenly spaced quantiles of their width."""
    src_len, tgt_len = encoded.src.lengths() + 1, encoded.tgt.lengths() + 1     # + EOS / BOS
    batches = tdata.token_batches(src_len, tgt_len, max_tokens, seed=seed)
    width = np.array([max(src_len[b].max(), tgt_len[b].max()) for b in batches])
    order = np.argsort(width, kind="stable")
    picks = [order[int((i + 1) * len(order) / (count + 1))] for i in range(count)]
    return [tdata.collate(encoded, batches[i]) for i in picks]


def count_tokens(batch):
    src, _, tgt_out = batch
    return int((src != PAD).sum()), int((tgt_out != PAD).sum())


# ------------------------------------------------------------------------------------------ reference

class TorchReference(nn.Module):
    """torch.nn.Transformer with embeddings, sinusoidal positions and a tied output layer like ours.

    The embedding is scaled by sqrt(d_model), the paper's sinusoids are added and dropout applied, as in
    transformer.Transformer; the final LayerNorms nn.Transformer adds are removed (the paper's post-norm
    model has none). forward(src [B, S], tgt_in [B, T]) -> logits [B, T, V].
    """

    def __init__(self, cfg, vocab, dropout=None):
        super().__init__()
        d, p = cfg.d_model, cfg.P_drop if dropout is None else dropout
        if cfg.d_k * cfg.h != d or cfg.d_v * cfg.h != d or cfg.norm_first or cfg.positional != "sinusoidal":
            raise ValueError("nn.Transformer needs d_k = d_v = d_model / h, post-norm and sinusoidal positions")
        self.pad_id, self.scale = cfg.pad_id, math.sqrt(d)
        self.embed = nn.Embedding(vocab, d)
        nn.init.normal_(self.embed.weight, mean=0.0, std=d ** -0.5)
        self.register_buffer("pe", sinusoidal_table(cfg.max_len, d), persistent=False)
        self.dropout = nn.Dropout(p)
        self.core = nn.Transformer(d, cfg.h, cfg.N, cfg.N, cfg.d_ff, dropout=p, activation="relu",
                                   layer_norm_eps=cfg.layer_norm_eps, batch_first=True, norm_first=False)
        self.core.encoder.norm = self.core.decoder.norm = None
        self.generator = nn.Linear(d, vocab, bias=False)
        self.generator.weight = self.embed.weight       # tied, as ours (src, tgt embeddings and output layer)

    def embed_positions(self, ids):
        return self.dropout(self.embed(ids) * self.scale + self.pe[:ids.size(1)].to(self.embed.weight.dtype))

    def forward(self, src, tgt_in):
        src_pad, tgt_pad = src == self.pad_id, tgt_in == self.pad_id
        T = tgt_in.size(1)
        future = torch.ones(T, T, dtype=torch.bool, device=tgt_in.device).triu(1)   # True: may not attend
        h = self.core(self.embed_positions(src), self.embed_positions(tgt_in), tgt_mask=future,
                      src_key_padding_mask=src_pad, tgt_key_padding_mask=tgt_pad,
                      memory_key_padding_mask=src_pad, tgt_is_causal=True)
        return self.generator(h)


def reference_optimizer(model, cfg, fused=None, warmup_steps=4000):
    """torch.optim.Adam with the paper's betas and eps, and the same warmup schedule as ours."""
    extra = {} if fused is None else {"fused": fused}
    optimizer = torch.optim.Adam(model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9, **extra)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda done: rate(done + 1, cfg.d_model, warmup_steps))
    return optimizer, scheduler


def reference_loss(logits, tgt_out, eps_ls, pad_id):
    """Summed label-smoothed cross-entropy over the non-pad targets, in float32."""
    return F.cross_entropy(logits.float().flatten(0, 1), tgt_out.flatten(), ignore_index=pad_id,
                           label_smoothing=eps_ls, reduction="sum")


def reference_step(net, optimizer, scheduler, batches, n_tgt, eps_ls, pad_id, autocast=None, loss_fn=reference_loss):
    """One optimizer step of the reference over `batches` (accumulated): returns the summed loss (a tensor)."""
    total = None
    for src, tgt_in, tgt_out in batches:
        if autocast is not None:
            with autocast():
                logits = net(src, tgt_in)
        else:
            logits = net(src, tgt_in)
        loss = loss_fn(logits, tgt_out, eps_ls, pad_id)      # outside autocast, as ours
        (loss / n_tgt).backward()
        total = loss.detach() if total is None else total + loss.detach()
    optimizer.step()
    scheduler.step()
    optimizer.zero_grad(set_to_none=True)
    return total


def cpu_fused_adam_supported():
    try:
        p = torch.zeros(2, requires_grad=True)
        p.grad = torch.ones(2)
        torch.optim.Adam([p], fused=True).step()
        return True
    except (RuntimeError, TypeError, ValueError):
        return False



def adam_kind(optimizer):
    d = optimizer.defaults
    return "fused" if d.get("fused") else "foreach" if d.get("foreach") else "default (for-loop on CPU)"


# ---------------------------------------------------------------------------------------------- main

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="base")
    ap.add_argument("--vocab", type=int, default=37000, help="joint BPE pieces = model vocabulary")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3, help="timed rounds; each runs every batch once per variant")
    ap.add_argument("--warmup", type=int, default=2, help="untimed steps per variant first")
    ap.add_argument("--batches", type=int, default=3, help="batches (one step each) per round")
    ap.add_argument("--max-tokens", type=int, default=800, help="padded tokens per batch (either side)")
    ap.add_argument("--max-len", type=int, default=100, help="pairs with more BPE tokens on a side are dropped")
    ap.add_argument("--corpus", default="wmt-news")
    ap.add_argument("--bpe-pairs", type=int, help="use only the first n cleaned pairs (default: all)")
    ap.add_argument("--dropout", type=float, help="override P_drop in both models (default: the preset's)")
    ap.add_argument("--no-fused-reference", action="store_true", help="skip the Adam(fused=True) reference")
    ap.add_argument("--ours-fused-adam", action="store_true",
                    help="also time ours with build_optimizer(fused=True), i.e. fused Adam on the CPU")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)

    t0 = time.perf_counter()
    vocab, encoded = encoded_corpus(args.corpus, args.vocab, args.max_len, args.bpe_pairs)
    V = len(vocab)
    batches = quantile_batches(encoded, args.max_tokens, args.batches)
    counts = [count_tokens(b) for b in batches]
    prep_s = time.perf_counter() - t0

    overrides = {} if args.dropout is None else {"P_drop": args.dropout}
    cfg = TransformerConfig.preset(args.preset, **overrides)
    rt = Runtime(rank=0, world=1, device=torch.device("cpu"))

    ours = Transformer(cfg, V)
    ours.validate_ids = False        # the trainer checks ids on the host; no device sync in the step
    opt, sched = build_optimizer(ours, cfg.d_model)
    ref = TorchReference(cfg, V)
    variants = {"ours": (ours, opt, sched)}
    fused_ok = cpu_fused_adam_supported()
    if args.ours_fused_adam and fused_ok:
        ours_f = copy.deepcopy(ours)
        variants["ours, fused Adam"] = (ours_f, *build_optimizer(ours_f, cfg.d_model, fused=True))
    variants["reference"] = (ref, *reference_optimizer(ref, cfg))
    if fused_ok and not args.no_fused_reference:
        ref_f = copy.deepcopy(ref)
        variants["reference, fused Adam"] = (ref_f, *reference_optimizer(ref_f, cfg, fused=True))

    def one_step(name, batch):
        model, optimizer, scheduler = variants[name]
        n_tgt = count_tokens(batch)[1]
        if name.startswith("ours"):
            return train_step(model, optimizer, scheduler, [batch], n_tgt, cfg.eps_ls, PAD, rt,
                              amp=False)     # float32, as the reference
        return reference_step(model, optimizer, scheduler, [batch], n_tgt, cfg.eps_ls, PAD)

    last = {}
    for name in variants:
        variants[name][0].train()
        for i in range(args.warmup):
            last[name] = one_step(name, batches[i % len(batches)])
    names = list(variants)
    step_s = {k: [] for k in names}
    round_tps = {k: [] for k in names}
    for r in range(args.rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            elapsed = 0.0
            for batch in batches:
                start = time.perf_counter()
                last[name] = one_step(name, batch)
                dt = time.perf_counter() - start
                step_s[name].append(dt)
                elapsed += dt
            round_tps[name].append(sum(c[1] for c in counts) / elapsed)
    for name, value in last.items():
        if not torch.isfinite(torch.as_tensor(value)).all():
            raise RuntimeError(f"{name}: the loss is not finite ({value})")

    n_src, n_tgt = sum(c[0] for c in counts), sum(c[1] for c in counts)
    params = {k: sum(p.numel() for p in v[0].parameters()) for k, v in variants.items()}
    shapes = ", ".join(f"{b[0].size(0)}x{b[0].size(1)}->{b[1].size(1)}" for b in batches)
    print(f"torch {torch.__version__} on {platform.machine()} CPU ({cpu_name()}), "
          f"{torch.get_num_threads()} threads, fp32")
    print(f"config: preset {args.preset} (N={cfg.N} d_model={cfg.d_model} d_ff={cfg.d_ff} h={cfg.h} "
          f"P_drop={cfg.P_drop} eps_ls={cfg.eps_ls}), vocabulary {V} (joint BPE on {args.corpus})")
    print(f"batches: {len(batches)} of <= {args.max_tokens} padded tokens (sentences x source->target length: "
          f"{shapes}); {n_src} source + {n_tgt} target non-pad tokens per round; data ready in {prep_s:.1f} s")
    print(f"parameters: ours {params['ours']:,}, reference {params['reference']:,}; ours' Adam: {adam_kind(opt)}; "
          f"CPU fused Adam supported: {'yes' if fused_ok else 'no'}")
    print(f"timing: {args.warmup} warm-up steps each, then {args.rounds} rounds x {len(batches)} steps, "
          f"alternating; medians")
    print(f"{'variant':24}{'s/step':>9}{'tgt tok/s':>11}{'src+tgt tok/s':>15}{'ours/this':>11}{'rounds min-max tgt tok/s':>26}")
    tps = {k: statistics.median(v) for k, v in round_tps.items()}
    for name in names:
        spread = f"{min(round_tps[name]):.0f}-{max(round_tps[name]):.0f}"
        print(f"{name:24}{statistics.median(step_s[name]):9.3f}{tps[name]:11.0f}"
              f"{tps[name] * (n_src + n_tgt) / n_tgt:15.0f}{tps['ours'] / tps[name]:10.2f}x{spread:>26}")
    print(f"ours/reference: {tps['ours'] / tps['reference']:.2f}x (target tokens/s, median of {args.rounds} rounds)")
    if "reference, fused Adam" in tps:
        print(f"ours/reference with fused Adam: {tps['ours'] / tps['reference, fused Adam']:.2f}x")


if __name__ == "__main__":
    main()
