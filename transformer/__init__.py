"""The Transformer of "Attention Is All You Need", exported from the book in book/.

Hand-written: the public face of the package. Every other module is exported from a chapter.
"""
from transformer.attention import MultiHeadAttention, attention, causal_mask, decoder_mask, padding_mask
