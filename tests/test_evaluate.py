"""Checkpoint averaging, translation of raw text, BLEU."""
import pytest
import torch

from transformer.corpora import load_split
from transformer.data import train_bpe
from transformer.evaluate import (average_checkpoints, load_model, sacre_bleu, split_compounds, tokenized_bleu,
                                  translate)
from transformer import Transformer, TransformerConfig


def test_average_of_checkpoints_is_the_mean(tmp_path):
    states = [{"w": torch.full((2, 2), float(i)), "steps": torch.tensor(i)} for i in (1, 2, 6)]
    paths = []
    for i, s in enumerate(states):
        paths.append(tmp_path / f"step_{i}.pt")
        torch.save({"model": s}, paths[-1])
    avg = average_checkpoints(paths)
    assert torch.equal(avg["w"], torch.full((2, 2), 3.0)) and avg["w"].dtype == torch.float32
    assert avg["steps"].item() == 1            # integers are not averaged: the first is kept


def test_average_refuses_different_models(tmp_path):
    torch.save({"model": {"w": torch.zeros(2)}}, tmp_path / "a.pt")
    torch.save({"model": {"w": torch.zeros(3)}}, tmp_path / "b.pt")
    with pytest.raises(ValueError, match="has shape"):
        average_checkpoints([tmp_path / "a.pt", tmp_path / "b.pt"])
    with pytest.raises(ValueError, match="at least one"):
        average_checkpoints([])


def test_load_model_without_checkpoints_says_to_train(tmp_path):
    with pytest.raises(FileNotFoundError, match="no checkpoints"):
        load_model(tmp_path)


def test_bleu_checks_alignment_and_labels_its_signature():
    hyps, refs = ["Ein Hund läuft.", "Zwei Katzen"], ["Ein Hund rennt.", "Zwei Katzen"]
    score, sig = sacre_bleu(hyps, refs)
    assert 0 < score < 100 and "tok:13a" in sig and "version:2.6.0" in sig
    assert sacre_bleu(refs, refs)[0] == pytest.approx(100.0)
    with pytest.raises(ValueError, match="2 hypotheses but 1 references"):
        sacre_bleu(hyps, refs[:1])
    with pytest.raises(ValueError, match="no sentences"):
        tokenized_bleu([], [])


def test_compound_splitting():
    # like the paper's perl one-liner s{(\S)-(\S)}{$1 ##AT##-##AT## $2}g: hyphens inside words only
    assert split_compounds("Test-Fall und E-Mail-Adresse - gut") == \
        "Test ##AT##-##AT## Fall und E ##AT##-##AT## Mail ##AT##-##AT## Adresse - gut"
    assert split_compounds("a-b-c") == "a ##AT##-##AT## b-c"    # overlapping matches are skipped, as in perl


def test_translate_keeps_order_and_refuses_over_long_input():
    torch.manual_seed(0)
    vocab = train_bpe(load_split("multi30k", "dev")[:300], vocab_size=600)
    model = Transformer(TransformerConfig.preset("tiny", max_len=64), len(vocab)).eval()
    sentences = ["A dog.", "Two men are playing football in a large park today.", "Hi"]
    batch = translate(model, vocab, sentences, beam_size=2, max_extra=5, progress=False)
    alone = [translate(model, vocab, [s], beam_size=2, max_extra=5, progress=False)[0] for s in sentences]
    assert batch == alone
    with pytest.raises(ValueError, match="sentence 1 has"):
        translate(model, vocab, ["ok", "word " * 80], progress=False)
