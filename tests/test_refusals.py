"""The checks in front of decoding, evaluation and the model files, each on its own: what they refuse, at
which boundary, and what they say. In-process and fast, so that mutation testing (tools/mutation.py) runs them
against every small change of those checks."""
import argparse
import json
import math
import os

import pytest
import torch

from transformer import Transformer, TransformerConfig
from transformer.checkpoint import MODEL_FORMAT, atomic_save, load_model_file, save_model
from transformer.data import train_vocab
from transformer.decode import TOO_LONG, TooLong, check_search, fit_lengths
from transformer.cli import check_writable, length_penalty_alpha, write_lines
from transformer.evaluate import check_parallel, sacre_bleu
from transformer.run import CHECKPOINTS, PROFILE, load_model

PAIRS = [("a dog runs on the grass", "ein Hund rennt auf dem Gras"),
         ("two men sit on a bench", "zwei Männer sitzen auf einer Bank")] * 20


@pytest.fixture(scope="module")
def vocab():
    return train_vocab(PAIRS, vocab_size=320)


@pytest.fixture(scope="module")
def model(vocab):
    torch.manual_seed(0)
    return Transformer(TransformerConfig(N=1, d_model=16, d_ff=32, h=2, max_len=12), len(vocab)).eval()


# --- fit_lengths: a sentence against the model's positions

def test_a_sentence_fits_only_below_max_len_and_the_default_is_an_error():
    assert fit_lengths([[5] * 4 + [3]], 6) == [[5] * 4 + [3]]           # 5 tokens < 6 positions
    with pytest.raises(TooLong) as err:                                   # the default: too_long="error"
        fit_lengths([[5, 3], [5] * 5 + [3]], 6)
    assert (err.value.index, err.value.tokens, err.value.max_len) == (1, 6, 6)
    assert str(err.value).startswith("sentence 2 has 6 tokens; the model accepts fewer than 6")


def test_truncate_keeps_the_first_pieces_and_the_end_of_sentence_and_skip_leaves_none():
    long = [10, 11, 12, 13, 14, 15, 3]
    assert fit_lengths([long, [7, 3]], 6, "truncate") == [[10, 11, 12, 13, 3], [7, 3]]
    assert fit_lengths([long, [7, 3]], 6, "skip") == [None, [7, 3]]
    with pytest.raises(ValueError, match=r"too_long must be one of \('error', 'truncate', 'skip'\), got 'cut'"):
        fit_lengths([long], 6, "cut")
    assert TOO_LONG == ("error", "truncate", "skip")


# --- check_search: settings refused before any sentence is translated

@pytest.mark.parametrize("beam", [0, -1, 2.5, True, "4"])
def test_a_beam_that_is_not_a_whole_number_of_at_least_one_is_refused(beam):
    with pytest.raises(ValueError, match=rf"beam_size must be a whole number of at least 1, got {beam!r}"):
        check_search(beam, 0.6, 100)


@pytest.mark.parametrize("alpha", [-0.1, math.nan, math.inf, True, "0.6"])
def test_an_alpha_that_is_not_a_finite_number_of_at_least_zero_is_refused(alpha):
    with pytest.raises(ValueError, match=r"alpha, the length penalty's exponent, must be a finite number of "
                                         rf"at least 0, got {alpha!r}"):
        check_search(4, alpha, 100)


@pytest.mark.parametrize("batch_tokens", [0, -5, 1.5, False])
def test_a_batch_of_no_tokens_is_refused(batch_tokens):
    with pytest.raises(ValueError, match=rf"batch_tokens must be a whole number of at least 1, got {batch_tokens!r}"):
        check_search(4, 0.6, batch_tokens)


def test_the_smallest_settings_are_accepted():
    assert check_search(1, 0, 1) is None and check_search(1, 0.0, 1) is None


def test_reordering_a_cache_before_its_first_step_changes_nothing_but_the_source_mask():
    from transformer.model import Transformer, TransformerConfig
    model = Transformer(TransformerConfig.preset("tiny"), 20)
    cache = {0: {}, 1: {"self": {}}, "src_mask": torch.tensor([[True], [False], [True]])}
    model.reorder_cache(cache, torch.tensor([2, 0]), torch.tensor([2, 0]))
    assert cache[0] == {} and cache[1] == {"self": {}}
    assert cache["src_mask"].tolist() == [[True], [True]]


# --- the evaluation's own checks

def test_hypotheses_and_references_must_be_line_aligned():
    with pytest.raises(ValueError) as err:
        check_parallel(["a"], ["a", "b"])
    assert str(err.value).endswith("they must be line-aligned")


def test_the_tokenizer_reaches_sacrebleu():
    hyps, refs = ["我们 走 了"], ["我们走了"]
    assert sacre_bleu(hyps, refs, tokenize="zh")[1] != sacre_bleu(hyps, refs)[1]
    assert "tok:zh" in sacre_bleu(hyps, refs, tokenize="zh")[1]


@pytest.mark.parametrize("text", ["-0.1", "nan", "inf", "x"])
def test_a_length_penalty_from_the_command_line_is_a_finite_number_of_at_least_zero(text):
    with pytest.raises(argparse.ArgumentTypeError, match=rf"expected a finite number of at least 0, got {text!r}"):
        length_penalty_alpha(text)
    assert length_penalty_alpha("0") == 0.0 and length_penalty_alpha("0.6") == 0.6


def test_an_output_is_refused_when_it_cannot_be_written_or_is_an_input(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match=rf"cannot write {tmp_path / 'file' / 'out'}: {tmp_path / 'file'} is a file, "
                                         "not a folder"):
        check_writable(tmp_path / "file" / "out")
    source = tmp_path / "in.en"
    source.write_text("a\n")
    with pytest.raises(ValueError, match=rf"{source} is also the input {source}: writing it would destroy"):
        check_writable(source, [source])
    check_writable(tmp_path / "new.de", [source])                 # a new file beside an input: fine
    check_writable(tmp_path / "new.de", [tmp_path / "missing"])   # an input that does not exist: nothing to compare
    other = tmp_path / "other.de"
    other.write_text("b\n")
    check_writable(other, [source])                               # an existing, writable output


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only files")
def test_a_read_only_output_is_refused(tmp_path):
    out = tmp_path / "out.de"
    out.write_text("x")
    out.chmod(0o444)
    with pytest.raises(ValueError, match=rf"cannot write {out}: permission denied"):
        check_writable(out)


def test_lines_are_written_as_utf8_whatever_the_locale(tmp_path, monkeypatch):
    import locale
    monkeypatch.setattr(locale, "getpreferredencoding", lambda *a: "ascii")
    write_lines(["Männer", "我们"], tmp_path / "out.txt")
    assert (tmp_path / "out.txt").read_bytes() == "Männer\n我们\n".encode("utf-8")


# --- the model files

def test_a_model_file_keeps_integer_buffers_and_loads_in_float32(model, vocab, tmp_path):
    model.register_buffer("counts", torch.arange(3))
    try:
        save_model(model, vocab, tmp_path / "m.pt")
    finally:
        del model._buffers["counts"]
    saved = torch.load(tmp_path / "m.pt", weights_only=True)
    assert saved["model"]["counts"].dtype == torch.int64
    assert all(t.dtype == torch.float16 for k, t in saved["model"].items() if k != "counts")
    save_model(model, vocab, tmp_path / "m.pt")
    loaded, loaded_vocab = load_model_file(tmp_path / "m.pt")
    assert all(p.dtype == torch.float32 for p in loaded.parameters()) and not loaded.training
    assert next(loaded.parameters()).device == torch.device("cpu") and len(loaded_vocab) == len(vocab)


@pytest.mark.parametrize("missing", ["model", "model_config", "vocab", "step"])
def test_a_checkpoint_missing_a_part_is_not_a_model(model, vocab, tmp_path, missing):
    state = {"model": model.state_dict(), "model_config": json.loads(json.dumps(vars(model.cfg))),
             "vocab": vocab.proto, "step": 7}
    loaded, _ = load_model_file(_save(tmp_path / "full.pt", state))        # all four parts: a checkpoint
    assert not loaded.training
    del state[missing]
    with pytest.raises(ValueError, match=rf"is neither a model written by save_model \(format {MODEL_FORMAT!r}\) "
                                         "nor a training checkpoint"):
        load_model_file(_save(tmp_path / "part.pt", state))


def _save(path, state):
    atomic_save(state, path)
    return path


def _run(tmp_path, model, vocab, steps, average_last):
    run = tmp_path / "run"
    (run / CHECKPOINTS).mkdir(parents=True)
    (run / PROFILE).write_text(json.dumps({"average_last": average_last}))
    for step in steps:
        atomic_save({"model": model.state_dict(), "model_config": vars(model.cfg), "vocab": vocab.proto,
                     "step": step}, run / CHECKPOINTS / f"step_{step:07d}.pt")
    return run


@pytest.mark.parametrize("bad", [0, -2, 1.5, True, "2"])
def test_an_average_of_fewer_than_one_checkpoint_is_refused(bad, tmp_path):
    with pytest.raises(ValueError, match=rf"average_last must be at least 1, got {bad!r}"):
        load_model(tmp_path, bad)


def test_a_run_with_fewer_checkpoints_than_its_profile_averages_says_so_and_averages_those(model, vocab, tmp_path,
                                                                                          capsys):
    run = _run(tmp_path, model, vocab, [10, 20], average_last=3)
    heard = []
    _, _, used = load_model(run, log=heard.append)
    assert used == ["step_0000010.pt", "step_0000020.pt"]
    assert heard == [f"{run}: its profile averages the last 3 checkpoints, but the run has 2; averaging those 2"]
    load_model(run)                                    # by default the message goes to standard error
    assert capsys.readouterr().err.startswith(f"{run}: its profile averages the last 3")
    # exactly as many as the profile averages: nothing to say
    run2 = _run(tmp_path / "b", model, vocab, [10, 20], average_last=2)
    _, _, used = load_model(run2, log=heard.append)
    assert used == ["step_0000010.pt", "step_0000020.pt"] and len(heard) == 1


def test_a_model_file_loads_on_the_device_asked_for(model, vocab, tmp_path):
    save_model(model, vocab, tmp_path / "m.pt")
    loaded, _, used = load_model(tmp_path / "m.pt", device="meta")
    assert used == ["m.pt"] and next(loaded.parameters()).device == torch.device("meta")
