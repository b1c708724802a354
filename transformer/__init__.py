"""The Transformer of "Attention Is All You Need" (Vaswani et al., 2017), exported from the book.

Hand-written: this file is the package's public face. Every other module is exported from the
chapter of the same section in book/ by tools/export_package.py; edit the notebook, not the module.

    from transformer import TransformerConfig, Transformer
    cfg = TransformerConfig.preset("base")
    model = Transformer(cfg, src_vocab=37000, tgt_vocab=37000)
    logits = model(src, tgt_in)          # [B, S], [B, T] token ids -> [B, T, V]
    out = beam_search(model, src, bos_id, eos_id)   # or greedy_decode: token ids [B, L]

    from transformer import Translator    # a trained model, text in and text out
    Translator.from_run().translate("Two dogs play in the snow.")   # the shipped Multi30k model

    from transformer import load_model, save_model   # a run folder or model file <-> a model
    model, vocab, used = load_model("runs/m30k")   # its last checkpoints averaged, in eval mode

A run folder's files are named, and its model loaded, by transformer.run. Training, evaluation and
translation are command lines (and modules): `python -m transformer.train
--profile NAME`, `python -m transformer.evaluate RUN_DIR`, `python -m transformer.translate [RUN_DIR]`,
and the Table 3 sweep `python -m transformer.variations`. They are not imported here, so that `-m`
runs them cleanly (Translator is loaded on first use). Also by module: transformer.parsing (section 6.3:
trees as sequences, evalb-style F1), transformer.vision (the encoder on image patches) and
transformer.paper (the paper's reported numbers, typed in once).
"""
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING

from transformer.data import Vocab
from transformer.decode import beam_search, greedy_decode
from transformer.loss import label_smoothed_nll
from transformer.optim import build_optimizer, rate
from transformer.checkpoint import save_model
from transformer.attention import CAUSAL, MultiHeadAttention, attention, causal_mask, decoder_mask, padding_mask
from transformer.embeddings import Embeddings, OutputProjection, tie_weights
from transformer.feed_forward import PositionwiseFeedForward
from transformer.layers import Decoder, DecoderLayer, Encoder, EncoderLayer, SublayerConnection
from transformer.model import PRESETS, Transformer, TransformerConfig
from transformer.positional import LearnedPositionalEmbedding, SinusoidalPositionalEncoding, sinusoidal_table

if TYPE_CHECKING:      # what __getattr__ loads on first use, as type checkers should see it
    from transformer.run import load_model
    from transformer.translate import Translator

try:
    __version__ = version("transformer")
except PackageNotFoundError:        # imported from a source tree that was never installed
    __version__ = "unknown"


def __getattr__(name):
    # transformer.translate is also a command (-m): importing it here would run it twice
    if name == "Translator":
        from transformer.translate import Translator
        return Translator
    # the run folder's module brings the corpora and the process group: loaded on first use
    if name == "load_model":
        from transformer.run import load_model
        return load_model
    raise AttributeError(f"module 'transformer' has no attribute {name!r}")


__all__ = [
    "Translator", "Transformer", "TransformerConfig", "PRESETS",
    "attention", "MultiHeadAttention", "padding_mask", "causal_mask", "decoder_mask", "CAUSAL",
    "SublayerConnection", "EncoderLayer", "DecoderLayer", "Encoder", "Decoder",
    "PositionwiseFeedForward", "Embeddings", "OutputProjection", "tie_weights",
    "SinusoidalPositionalEncoding", "LearnedPositionalEmbedding", "sinusoidal_table",
    "greedy_decode", "beam_search", "label_smoothed_nll", "build_optimizer", "rate", "Vocab",
    "load_model", "save_model",
]
