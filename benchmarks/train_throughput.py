"""Training throughput: our Transformer against torch.nn.Transformer, same config, batch and threads.

Both models get the same embeddings, sinusoidal positions and tied output layer, so the comparison is
between the two encoder-decoder cores. Each timed step is forward, cross-entropy, backward and an Adam
step. The two models alternate in rounds inside one process, so both see the same machine state.
Dropout is off in both (nn.Transformer also drops attention weights and FFN activations, which would
make it do more work than the paper's model).

    python benchmarks/train_throughput.py                       # base and small presets
    python benchmarks/train_throughput.py --presets tiny --steps 20
"""
import argparse
import platform
import statistics
import time

import torch
from torch import nn
from tqdm import tqdm

from transformer import Transformer, TransformerConfig


class TorchReference(nn.Module):
    """torch.nn.Transformer wrapped with the same embeddings, positions and tied output layer as ours."""

    def __init__(self, cfg, vocab):
        super().__init__()
        ours = Transformer(cfg, vocab, vocab)
        self.embed, self.pos, self.generator = ours.src_embed, ours.src_pos, ours.generator
        self.core = nn.Transformer(cfg.d_model, cfg.h, cfg.N, cfg.N, cfg.d_ff, dropout=cfg.P_drop,
                                   activation="relu", layer_norm_eps=cfg.layer_norm_eps, batch_first=True,
                                   norm_first=cfg.norm_first)
        self.core.encoder.norm = self.core.decoder.norm = None   # the paper's post-norm has no final norm
        self.pad_id = cfg.pad_id

    def forward(self, src, tgt):
        future = torch.ones(tgt.size(1), tgt.size(1), dtype=torch.bool, device=tgt.device).triu(1)
        h = self.core(self.pos(self.embed(src)), self.pos(self.embed(tgt)), tgt_mask=future,
                      src_key_padding_mask=src == self.pad_id, tgt_key_padding_mask=tgt == self.pad_id,
                      memory_key_padding_mask=src == self.pad_id)
        return self.generator(h)


def make_batch(batch, length, vocab, generator):
    """Token ids with sentence lengths spread between half and full length (padding at the end)."""
    ids = torch.randint(1, vocab, (batch, length), generator=generator)
    lengths = torch.randint(length // 2, length + 1, (batch,), generator=generator)
    ids[torch.arange(length)[None] >= lengths[:, None]] = 0
    return ids


def step_time(model, optimizer, src, tgt_in, tgt_out, steps):
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        logits = model(src, tgt_in)
        loss = nn.functional.cross_entropy(logits.flatten(0, 1), tgt_out.flatten(), ignore_index=0)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        times.append(time.perf_counter() - start)
    return times


def bench(preset, batch, length, vocab, steps, rounds):
    cfg = TransformerConfig.preset(preset, P_drop=0.0)
    g = torch.Generator().manual_seed(0)
    src, tgt = make_batch(batch, length, vocab, g), make_batch(batch, length + 1, vocab, g)
    tgt_in, tgt_out = tgt[:, :-1], tgt[:, 1:]
    tokens = int((src != 0).sum() + (tgt_out != 0).sum())
    models = {"ours": Transformer(cfg, vocab, vocab), "torch.nn.Transformer": TorchReference(cfg, vocab)}
    opts = {k: torch.optim.Adam(m.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9) for k, m in models.items()}
    for k in models:   # warm-up: allocator, kernels, first Adam state
        step_time(models[k], opts[k], src, tgt_in, tgt_out, 2)
    times = {k: [] for k in models}
    for _ in tqdm(range(rounds), desc=f"{preset}: rounds", leave=False):
        for k in models:
            times[k] += step_time(models[k], opts[k], src, tgt_in, tgt_out, steps)
    return cfg, tokens, {k: tokens / statistics.median(v) for k, v in times.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--presets", nargs="+", default=["small", "base"])
    ap.add_argument("--batch", type=int, default=16, help="sentences per batch")
    ap.add_argument("--length", type=int, default=32, help="longest sentence, in tokens")
    ap.add_argument("--vocab", type=int, default=8000)
    ap.add_argument("--steps", type=int, default=3, help="timed steps per model per round")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=torch.get_num_threads())
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__} on {platform.processor() or platform.machine()}, {args.threads} threads; "
          f"batch {args.batch} x <= {args.length} tokens, vocabulary {args.vocab}, dropout off; "
          f"median of {args.steps * args.rounds} steps")
    print(f"{'preset':8}{'params':>10}{'tokens/step':>13}{'ours tok/s':>12}{'torch tok/s':>13}{'ratio':>8}")
    for preset in args.presets:
        cfg, tokens, tps = bench(preset, args.batch, args.length, args.vocab, args.steps, args.rounds)
        n = Transformer(cfg, args.vocab, args.vocab).num_parameters()
        ratio = tps["ours"] / tps["torch.nn.Transformer"]
        print(f"{preset:8}{n / 1e6:>9.1f}M{tokens:>13}{tps['ours']:>12.0f}{tps['torch.nn.Transformer']:>13.0f}"
              f"{ratio:>8.2f}")


if __name__ == "__main__":
    main()
