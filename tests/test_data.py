"""transformer.data: reading, cleaning, BPE, batching; clear errors for bad corpora."""
import numpy as np
import pytest
import torch

from tests.conftest import need_corpus
from transformer.corpora import fetch, load_split
from transformer.data import (BOS, EOS, PAD, BatchStream, ParallelData, TokenArray, accumulation_steps, clean_pairs,
                              collate, encode_pairs, read_lines, read_parallel, token_batches,
                              train_vocab)


def write(path, text):
    path.write_bytes(text.encode("utf-8") if isinstance(text, str) else text)
    return path


def test_read_parallel_keeps_alignment_and_odd_characters(tmp_path):
    src = write(tmp_path / "a.en", "one\r\ntwo\u2028still two\n\nfour")
    tgt = write(tmp_path / "a.de", "eins\nzwei\n\nvier\n")
    assert read_parallel(src, tgt) == [("one", "eins"), ("two\u2028still two", "zwei"), ("", ""), ("four", "vier")]


def test_misaligned_files_name_both_files_and_counts(tmp_path):
    src = write(tmp_path / "a.en", "1\n2\n3\n")
    tgt = write(tmp_path / "a.de", "1\n2\n")
    with pytest.raises(ValueError, match=r"misaligned.*a\.en has 3 lines.*a\.de has 2"):
        read_parallel(src, tgt)


def test_missing_file_names_it_and_the_fix(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"nope\.en: no such file"):
        read_lines(tmp_path / "nope.en")


def test_empty_corpus(tmp_path):
    with pytest.raises(ValueError, match="empty corpus"):
        read_parallel(write(tmp_path / "e.en", ""), write(tmp_path / "e.de", ""))


def test_undecodable_bytes_give_file_and_line(tmp_path):
    bad = write(tmp_path / "bad.de", b"gut\nauch gut\nkaputt \xff hier\n")
    with pytest.raises(ValueError, match=r"bad\.de: line 3 is not valid UTF-8"):
        read_lines(bad)


def test_unknown_corpus_and_split():
    with pytest.raises(ValueError, match="unknown corpus"):
        fetch("wmt99", "train")
    with pytest.raises(ValueError, match="has splits"):
        fetch("multi30k", "validation")


def test_missing_news_sets_say_where_to_get_them(tmp_path):
    with pytest.raises(FileNotFoundError, match="WMT news test sets"):
        fetch("wmt-news", "train", root=tmp_path)


def test_cleaning_rules():
    pairs = [("a b c", "x y z"), ("", "x"), ("a " * 300, "x " * 300), ("a", "x y z w"), ("a  b", " x  y ")]
    kept, dropped = clean_pairs(pairs, max_words=250, max_ratio=1.5)
    assert kept == [("a b c", "x y z"), ("a b", "x y")]
    assert dropped == {"empty": 1, "too long": 1, "length ratio": 1}


def test_multi30k_from_the_cache_directory():
    need_corpus("multi30k", "test")
    pairs = load_split("multi30k", "test")
    assert len(pairs) == 1000 and all(s and t for s, t in pairs)


@pytest.fixture(scope="module")
def vocab():
    need_corpus("multi30k", "dev")
    pairs = load_split("multi30k", "dev")
    return train_vocab(pairs, vocab_size=500)


def test_bpe_special_ids_and_lossless_round_trip(vocab):
    assert (vocab.sp.pad_id(), vocab.sp.unk_id(), vocab.sp.bos_id(), vocab.sp.eos_id()) == (PAD, 1, BOS, EOS)
    for text in ["Ein Mädchen springt über 3 Pfützen.", "Zoë's café – naïve ☃ 漢字"]:
        assert vocab.decode(vocab.encode(text)) == text
    assert vocab.decode([BOS] + vocab.encode("Hallo") + [EOS, PAD, PAD]) == "Hallo"


def test_encode_pairs_drops_long_and_refuses_nothing_left(vocab):
    data, dropped = encode_pairs(vocab, [("a dog", "ein Hund"), ("a " * 50, "ein " * 50)], max_len=10)
    assert len(data) == 1 and dropped == 1
    with pytest.raises(ValueError, match="no sentence pair left"):
        encode_pairs(vocab, [("a " * 50, "b")], max_len=10)


def test_token_array_round_trip():
    seqs = [[1, 2, 3], [], [7], list(range(100))]
    arr = TokenArray.from_lists(seqs)
    assert [a.tolist() for a in (arr[i] for i in range(len(arr)))] == seqs
    again = TokenArray.from_state(arr.state())
    assert again[3].tolist() == seqs[3] and again.lengths().tolist() == [3, 0, 1, 100]


def lengths(n=2000, seed=0):
    rng = np.random.default_rng(seed)
    return rng.integers(1, 60, n), rng.integers(1, 60, n)


def test_token_batches_cover_every_example_once_within_budget():
    src, tgt = lengths()
    batches = token_batches(src, tgt, max_tokens=500, seed=3, epoch=1)
    flat = np.concatenate(batches)
    assert sorted(flat.tolist()) == list(range(len(src)))
    for b in batches:
        assert len(b) * max(src[b].max(), tgt[b].max()) <= 500


def test_token_batches_depend_only_on_seed_and_epoch():
    src, tgt = lengths()
    a = token_batches(src, tgt, 500, seed=1, epoch=0)
    b = token_batches(src, tgt, 500, seed=1, epoch=0)
    c = token_batches(src, tgt, 500, seed=1, epoch=1)
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    assert not all(len(x) == len(y) and np.array_equal(x, y) for x, y in zip(a, c))


def test_token_batches_refuse_a_sentence_longer_than_the_budget():
    with pytest.raises(ValueError, match="does not fit in max_tokens=10"):
        token_batches(np.array([5, 11]), np.array([3, 3]), max_tokens=10)


def small_data(n=300):
    rng = np.random.default_rng(0)
    src = [rng.integers(4, 50, rng.integers(1, 20)).tolist() for _ in range(n)]
    tgt = [rng.integers(4, 50, rng.integers(1, 20)).tolist() for _ in range(n)]
    return ParallelData(TokenArray.from_lists(src), TokenArray.from_lists(tgt)), src, tgt


def test_collate_shifts_the_target_by_one():
    data, src, tgt = small_data()
    s, ti, to = collate(data, [0, 1, 2])
    for row, i in enumerate([0, 1, 2]):
        n, m = len(src[i]), len(tgt[i])
        assert s[row, :n + 1].tolist() == src[i] + [EOS] and (s[row, n + 1:] == PAD).all()
        assert ti[row, :m + 1].tolist() == [BOS] + tgt[i]
        assert to[row, :m + 1].tolist() == tgt[i] + [EOS] and (to[row, m + 1:] == PAD).all()


def test_batch_stream_resumes_and_splits_like_accumulation():
    data, _, _ = small_data()
    one = BatchStream(data, max_tokens=60, seed=5)
    groups = [one.next_group(2) for _ in range(40)]           # crosses several epochs
    other = BatchStream(data, max_tokens=60, seed=5)
    for _ in range(17):
        other.next_group(2)
    resumed = BatchStream(data, max_tokens=60, seed=5)
    resumed.load_state_dict(other.state_dict())
    for g in groups[17:]:
        assert all(np.array_equal(a, b) for a, b in zip(g, resumed.next_group(2)))
    with pytest.raises(ValueError, match="seed=5, 60 tokens per batch and pad_to=0; this run has seed=5, 61 "):
        BatchStream(data, max_tokens=61, seed=5).load_state_dict(other.state_dict())
    with pytest.raises(ValueError, match="this run has seed=5, 60 and pad_to=8"):
        BatchStream(data, max_tokens=60, seed=5, pad_to=8).load_state_dict(other.state_dict())
    # a checkpoint written before shape classes existed resumes a run without them
    older = {k: v for k, v in other.state_dict().items() if k != "pad_to"}
    BatchStream(data, max_tokens=60, seed=5).load_state_dict(older)


def test_accumulation_reaches_the_step_size():
    assert accumulation_steps(25000, 3125, 8) == 1
    assert accumulation_steps(25000, 3125, 1) == 8
    assert accumulation_steps(25000, 12500, 1) == 2
    assert accumulation_steps(1000, 5000, 1) == 1


def test_bpe_keeps_symbols_whole_and_refuses_a_symbol_with_a_space():
    pairs = [("the cat sat on the mat", "(S (NP XX XX )NP (VP XX )VP )S"),
             ("dogs run", "(S (NP XX )NP (VP XX )VP )S")] * 40
    symbols = sorted({w for _, t in pairs for w in t.split()})
    vocab = train_vocab(pairs, vocab_size=300, symbols=symbols)
    assert vocab.pieces(pairs[0][1]) == ["\u2581" + s for s in pairs[0][1].split()]
    assert vocab.decode(vocab.encode(pairs[0][1])) == pairs[0][1]
    # a word that starts with a symbol's letters is split after them, and still decodes
    assert vocab.pieces("XXL")[0] == "\u2581XX" and vocab.decode(vocab.encode("XXL")) == "XXL"
    without = train_vocab(pairs, vocab_size=300)
    assert len(without.pieces(pairs[0][1])) > len(pairs[0][1].split())
    with pytest.raises(ValueError, match="one word"):
        train_vocab(pairs, vocab_size=300, symbols=["(S XX"])


def test_a_word_vocabulary_gives_one_entry_per_word_and_the_rarest_none():
    """vocab_model "word" (chapter 6.3's source side): one id per word, an unseen or rare word the unknown
    token, never spelled in bytes; anything else is refused."""
    from transformer.data import UNK
    pairs = [("the cat sat on the mat .", "(S (NP XX XX ) (VP XX ) XX )"),
             ("a dog runs fast .", "(S (NP XX XX ) (VP XX ) XX )")] * 30 + [("one rare word", "(X XX XX XX )")]
    vocab = train_vocab(pairs, vocab_size=20, model_type="word")
    ids = vocab.encode("the cat runs home .")
    assert len(ids) == 5 and ids[3] == UNK and UNK not in ids[:3]
    # sentencepiece itself writes a run of unknown words as one unknown id
    assert vocab.encode(["one zebra ate two figs", "the\u00a0cat"]) == [
        [vocab.encode("one")[0], UNK, UNK, UNK, UNK], vocab.encode("the cat")]
    assert len(vocab) <= 20 and not any(vocab.sp.is_byte(i) for i in range(len(vocab)))
    with pytest.raises(ValueError, match="model_type"):
        train_vocab(pairs, vocab_size=20, model_type="char")


def test_a_run_folder_made_before_whole_target_words_still_resumes(tmp_path):
    import json

    from transformer.run import check_run_data, data_manifest
    from transformer.profiles import get_profile
    profile = get_profile("tiny")
    old = {k: v for k, v in data_manifest(profile).items() if k != "whole_target_words"}
    (tmp_path / "data.json").write_text(json.dumps(old))
    check_run_data(profile, tmp_path)
    with pytest.raises(ValueError, match="whole_target_words"):
        check_run_data(profile.replace(whole_target_words=True), tmp_path)
