"""How many tensor shapes a profile's steps feed the model over one epoch, and what shape classes cost.

    .venv/bin/python benchmarks/batch_shapes.py                    # wmt-news-base; pad_to 0, 8, 16, 32
    .venv/bin/python benchmarks/batch_shapes.py --profile tiny --pad-to 0 8
    .venv/bin/python benchmarks/batch_shapes.py --record results/batch-shapes/wmt-news-base.json

A compiled step compiles again when a new shape breaks what the compiler assumed of the shapes it had
seen (chapter 5.1, "Few shapes for a compiled step"). This counts, over epoch 0 of the profile's
training data as the trainer cuts it on one device (transformer.step.StepFeeder: steps of
tokens_per_step padded tokens from a BatchStream, cut by split_batch into micro-batches of max_tokens;
with shape classes, micro-batches of one class each, grouped into steps), the distinct micro-batch
shapes and the tokens the model processes per real token, for each pad_to: 0 is the trainer's eager
batching (every micro-batch padded to its own longest sentence, each side apart); otherwise each
micro-batch is cut and padded to its shape class (transformer.data.batch_shape). The data is
prepared as the trainer prepares it: the corpus's training split cleaned with the profile's length
ratio, a joint BPE of the profile's vocabulary size, pairs longer than max_len dropped. Nothing is
timed: the numbers depend on the data and the code only.
"""
import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))   # the repository: transformer/, benchmarks/
from benchmarks.train_step import encoded_corpus  # noqa: E402
from transformer.data import BatchStream, batch_shape, split_batch  # noqa: E402
from transformer.profiles import get_profile  # noqa: E402
from transformer.runlog import command_line, write_record  # noqa: E402


def epoch_shapes(data, profile, pad_to):
    """Distinct micro-batch shapes ((rows, source length, target length)) over epoch 0 as the trainer
    cuts it on one device, the number of micro-batches, the tokens (both sides) the model processes, and
    how many of those are in rows of padding only (the last batch of each shape class).

    Without shape classes a step is a batch of <= tokens_per_step tokens cut by split_batch into
    micro-batches of <= max_tokens; with them, each micro-batch is a batch of the stream
    (BatchStream with max_tokens and pad_to), and a step a group of them (transformer.step.StepFeeder).
    """
    stream = BatchStream(data, profile.max_tokens if pad_to else profile.tokens_per_step,
                         seed=profile.seed, pad_to=pad_to)
    sizes = np.maximum(stream.src_len, stream.tgt_len)
    shapes, micro, processed, empty_rows = set(), 0, 0, 0
    for batch in stream.batches(0):
        if pad_to:
            rows, length = batch_shape(int(sizes[batch].max()), profile.max_tokens, pad_to)
            parts, classes = [batch], [(rows, length, length)]
            empty_rows += (rows - len(batch)) * 2 * length
        else:
            parts = split_batch(batch, sizes, profile.max_tokens, 1)
            classes = [(len(p), int(stream.src_len[p].max()), int(stream.tgt_len[p].max())) for p in parts]
        for shape in classes:
            shapes.add(shape)
            micro += 1
            processed += shape[0] * (shape[1] + shape[2])
    return shapes, micro, processed, empty_rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profile", default="wmt-news-base")
    ap.add_argument("--pad-to", type=int, nargs="+", default=[0, 8, 16, 32])
    ap.add_argument("--record", help="also write the numbers to this JSON file (a results record)")
    args = ap.parse_args(argv)
    if any(p < 0 for p in args.pad_to):
        ap.error("--pad-to takes 0 (no shape classes) or a positive multiple")
    profile = get_profile(args.profile)
    vocab, data = encoded_corpus(profile.corpus, profile.vocab_size, profile.max_len,
                                 clean_ratio=profile.clean_ratio)
    real = int((data.src.lengths() + 1).sum() + (data.tgt.lengths() + 1).sum())    # + EOS, + BOS/EOS
    print(f"profile {profile.name}: {len(data)} training pairs of {profile.corpus}, joint BPE of {len(vocab)} "
          f"pieces, max_len {profile.max_len}; steps of <= {profile.tokens_per_step} tokens in micro-batches "
          f"of <= {profile.max_tokens}; epoch 0, one device")
    print(f"{'pad_to':>8}{'shapes':>8}{'micro-batches':>15}{'tokens processed per real':>28}"
          f"{'of which in rows of padding':>30}")
    rows = []
    for pad_to in args.pad_to:
        shapes, micro, processed, empty_rows = epoch_shapes(data, profile, pad_to)
        rows.append({"pad_to": pad_to, "shapes": len(shapes), "micro_batches": micro,
                     "processed_per_real": round(processed / real, 4),
                     "padding_rows_per_real": round(empty_rows / real, 4)})
        print(f"{pad_to or 'none':>8}{len(shapes):>8}{micro:>15}{processed / real:>28.3f}{empty_rows / real:>30.3f}")
    if args.record:
        write_record(args.record, {
            "what": "distinct micro-batch shapes over one epoch, and tokens processed per real token",
            "profile": profile.name, "corpus": profile.corpus, "pairs": len(data), "vocab_size": len(vocab),
            "max_len": profile.max_len, "tokens_per_step": profile.tokens_per_step,
            "max_tokens": profile.max_tokens, "real_tokens": real, "rows": rows}, command_line())
        print(f"wrote {args.record}")
    return rows


if __name__ == "__main__":
    main()
