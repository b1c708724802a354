"""Checkpoint averaging, translation of raw text, BLEU."""
import json
from dataclasses import asdict

import pytest
import torch

from tests.conftest import need_corpus
from transformer.checkpoint import average_checkpoints
from transformer.corpora import load_split
from transformer.data import EOS, PAD, train_vocab
from transformer.decode import translate
from transformer.evaluate import evaluate_run, main, sacre_bleu, split_compounds, tokenized_bleu
from transformer.run import load_model, save_checkpoint
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


def test_a_run_s_model_reads_each_checkpoint_once(tmp_path, monkeypatch):
    """load_model takes the configuration and vocabulary from the newest checkpoint, and averages it with
    the ones before without reading it a second time."""
    from transformer import checkpoint as checkpoint_module
    from transformer import run as run_module
    vocab = train_vocab([("a dog runs .", "ein hund läuft .")] * 20, vocab_size=300)
    cfg = TransformerConfig(N=1, d_model=8, d_ff=8, h=2, max_len=16)
    torch.manual_seed(0)
    for step in (1, 2, 3):
        save_checkpoint(tmp_path, step, {"model": Transformer(cfg, len(vocab)).state_dict(),
                                         "model_config": asdict(cfg), "vocab": vocab.proto}, keep=5)
    read = []
    real = checkpoint_module.load_checkpoint

    def counted(path, *args, **kwargs):
        read.append(path.name)
        return real(path, *args, **kwargs)

    monkeypatch.setattr(checkpoint_module, "load_checkpoint", counted)
    monkeypatch.setattr(run_module, "load_checkpoint", counted)
    _, _, used = load_model(tmp_path, 3)
    assert sorted(read) == sorted(used) == ["step_0000001.pt", "step_0000002.pt", "step_0000003.pt"]


def test_load_model_without_checkpoints_says_to_train(tmp_path):
    with pytest.raises(FileNotFoundError, match=rf"^no checkpoints in {tmp_path / 'checkpoints'}; train first"):
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
    need_corpus("multi30k", "dev")
    torch.manual_seed(0)
    vocab = train_vocab(load_split("multi30k", "dev")[:300], vocab_size=600)
    model = Transformer(TransformerConfig.preset("tiny", max_len=64), len(vocab)).eval()
    sentences = ["A dog.", "Two men are playing football in a large park today.", "Hi"]
    batch = translate(model, vocab, sentences, beam_size=2, max_extra=5, progress=False)
    alone = [translate(model, vocab, [s], beam_size=2, max_extra=5, progress=False)[0] for s in sentences]
    assert batch == alone
    with pytest.raises(ValueError, match="sentence 2 has"):        # counted from 1, as lines are
        translate(model, vocab, ["ok", "word " * 80], progress=False)


# ------------------------------------------------ a whole evaluation, end to end --

SOURCES = ["a dog runs in the park .", "two men play football today .", "the E-Mail arrived .", "a red car ."]
REFERENCES = ["ein Hund rennt im Park .", "zwei Männer spielen heute Fußball .", "die E-Mail kam an .",
              "ein rotes Auto ."]


@pytest.fixture
def finished_run(tmp_path, monkeypatch):
    """A run folder with three checkpoints, a corpus folder holding a 4-sentence multi30k dev split, and
    decoders replaced by an oracle that returns each source's reference: a perfect translator."""
    root = tmp_path / "data"
    (root / "multi30k").mkdir(parents=True)
    (root / "multi30k" / "val.en").write_text("\n".join(SOURCES) + "\n", encoding="utf-8")
    (root / "multi30k" / "val.de").write_text("\n".join(REFERENCES) + "\n", encoding="utf-8")
    (root / "multi30k" / "test_2016_flickr.en").write_text("\n".join(SOURCES[:2]) + "\n", encoding="utf-8")
    (root / "multi30k" / "test_2016_flickr.de").write_text("\n".join(REFERENCES[:2]) + "\n", encoding="utf-8")
    vocab = train_vocab(list(zip(SOURCES, REFERENCES)) * 20, vocab_size=300)
    run = tmp_path / "run"
    run.mkdir()
    (run / "profile.json").write_text(json.dumps({"corpus": "multi30k", "average_last": 2}))
    cfg = TransformerConfig(N=1, d_model=8, d_ff=16, h=2, max_len=32)
    model = Transformer(cfg, len(vocab))
    for step in (10, 20, 30):
        save_checkpoint(run, step, {"model": model.state_dict(), "model_config": asdict(cfg), "vocab": vocab.proto},
                        keep=5)
    answers = {tuple(vocab.encode(s) + [EOS]): vocab.encode(r) + [EOS] for s, r in zip(SOURCES, REFERENCES)}
    calls = []

    def oracle(name):
        def decode(model, src, bos, eos, *args):
            calls.append((name, args))
            rows = [answers[tuple(row[row != PAD].tolist())] for row in src]
            out = torch.full((len(rows), max(map(len, rows))), PAD)
            for i, r in enumerate(rows):
                out[i, :len(r)] = torch.tensor(r)
            return out
        return decode
    monkeypatch.setattr("transformer.decode.beam_search", oracle("beam"))
    monkeypatch.setattr("transformer.decode.greedy_decode", oracle("greedy"))
    return run, root, calls


def test_evaluate_run_scores_detokenised_translations_of_the_right_split(finished_run):
    run, root, calls = finished_run
    result = evaluate_run(run, "dev", data_root=root, beam_size=3, alpha=0.7, progress=False)
    assert result["hypotheses"] == REFERENCES and result["references"] == REFERENCES
    assert result["sources"] == SOURCES and result["sentences"] == 4
    assert result["sacrebleu"] == pytest.approx(100.0) and result["tokenized_bleu"] == pytest.approx(100.0)
    assert result["checkpoints"] == ["step_0000020.pt", "step_0000030.pt"]     # the profile's average_last
    assert (result["corpus"], result["split"], result["beam_size"], result["alpha"]) == ("multi30k", "dev", 3, 0.7)
    assert {name for name, _ in calls} == {"beam"} and all(args[:2] == (3, 0.7) for _, args in calls)
    assert "tok:13a" in result["sacrebleu_signature"] and "##AT##" in result["tokenized_bleu_method"]
    assert result["translate_seconds"] >= 0
    short = evaluate_run(run, "dev", average_last=3, beam_size=1, data_root=root, max_sentences=2, progress=False)
    assert short["sentences"] == 2 and short["hypotheses"] == REFERENCES[:2] and len(short["checkpoints"]) == 3
    assert calls[-1][0] == "greedy"


def test_the_evaluation_command_prints_metrics_and_writes_the_translations(finished_run, capsys):
    run, root, calls = finished_run
    hyps = run / "hyps.txt"
    main([str(run), "--split", "dev", "--data-dir", str(root), "--average", "3", "--beam", "2", "--alpha", "0.5",
          "--device", "cpu", "--hyps", str(hyps)])
    printed = json.loads(capsys.readouterr().out)
    assert hyps.read_text(encoding="utf-8") == "\n".join(REFERENCES) + "\n"
    assert printed["sacrebleu"] == pytest.approx(100.0) and printed["split"] == "dev"
    assert len(printed["checkpoints"]) == 3 and (printed["beam_size"], printed["alpha"]) == (2, 0.5)
    assert not {"hypotheses", "sources", "references"} & set(printed)
    assert all(args[:2] == (2, 0.5) for _, args in calls)


def test_averaging_sums_in_double_precision_and_names_the_odd_file(tmp_path):
    # in float32, 1e8 + 1 rounds back to 1e8 and the 1 is lost; the mean of the three is 1/3
    for name, value in (("a", 1e8), ("b", 1.0), ("c", -1e8)):
        torch.save({"model": {"w": torch.tensor([value])}}, tmp_path / f"{name}.pt")
    avg = average_checkpoints([tmp_path / f"{n}.pt" for n in "abc"])
    assert avg["w"].item() == pytest.approx(1 / 3, rel=1e-6)
    torch.save({"model": {"w": torch.zeros(2)}}, tmp_path / "d.pt")
    torch.save({"model": {"v": torch.zeros(1)}}, tmp_path / "e.pt")
    with pytest.raises(ValueError, match=r"^\S*d\.pt: w has shape \(2,\), \S*a\.pt \(1,\)$"):
        average_checkpoints([tmp_path / "a.pt", tmp_path / "b.pt", tmp_path / "d.pt"])
    with pytest.raises(ValueError, match=r"^\S*e\.pt holds a different model than \S*a\.pt$"):
        average_checkpoints([tmp_path / "a.pt", tmp_path / "b.pt", tmp_path / "e.pt"])
    with pytest.raises(ValueError, match=r"^average_checkpoints needs at least one checkpoint$"):
        average_checkpoints([])
    with pytest.raises(ValueError, match=r"^no sentences to score$"):
        sacre_bleu([], [])


def test_the_evaluation_command_s_defaults_and_help(finished_run, monkeypatch, capsys):
    run, root, calls = finished_run
    got = {}
    result = {"hypotheses": [], "sacrebleu": 1.0, "sacrebleu_lowercase": 1.0, "sentences": 0, "split": "test",
              "beam_size": 4, "checkpoints": []}
    monkeypatch.setattr("transformer.evaluate.evaluate_run",
                        lambda *args, **kw: got.update(args=args, kw=kw) or result)
    for cuda, device in ((False, "cpu"), (True, "cuda:0")):
        monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
        main([str(run)])
        # run_dir, split, average, beam, alpha, data_dir
        assert got["args"] == (str(run), "test", None, 4, 0.6, None)
        assert got["kw"] == {"device": torch.device(device), "src": None, "ref": None}
    capsys.readouterr()
    with pytest.raises(SystemExit):
        main(["--help"])
    usage = " ".join(capsys.readouterr().out.split())
    assert usage.startswith("usage: python -m transformer.evaluate ")
    assert "sacreBLEU and tokenised BLEU, the attention and the encoder's similarity along a sentence" in usage
    assert "--average AVERAGE average the last N checkpoints (default: the profile's) --beam BEAM beam size " \
           "(1: greedy; default 4) --alpha" in usage
    assert "--hyps HYPS write the translations to this file" in usage and "examples:" in usage


def test_evaluate_run_times_the_translation(finished_run):
    run, root, _ = finished_run
    result = evaluate_run(run, "dev", data_root=root, progress=False)
    assert 0 <= result["translate_seconds"] < 60 and result["checkpoints"] == ["step_0000020.pt", "step_0000030.pt"]


def test_evaluate_run_defaults_and_rounding(finished_run, monkeypatch):
    run, root, calls = finished_run
    result = evaluate_run(run, data_root=root, progress=False)          # the test split, beam 4, alpha 0.6
    assert (result["split"], result["sentences"], result["beam_size"], result["alpha"]) == ("test", 2, 4, 0.6)
    assert all(args[:2] == (4, 0.6) for _, args in calls)
    assert result["tokenized_bleu_method"] == "tokenised BLEU: 13a tokens + ##AT## compound splitting, tok:none"
    assert isinstance(result["translate_seconds"], float)
    # one sentence wrong: a score with many decimals, reported to two
    monkeypatch.setattr("transformer.evaluate.translate", lambda *a, **k: REFERENCES[:3] + ["ein Auto ."])
    result = evaluate_run(run, "dev", data_root=root, progress=False)
    import sacrebleu
    exact = sacrebleu.corpus_bleu(REFERENCES[:3] + ["ein Auto ."], [REFERENCES]).score
    assert exact != round(exact, 2) and result["sacrebleu"] == round(exact, 2)
    assert result["tokenized_bleu"] == round(result["tokenized_bleu"], 2) != round(result["tokenized_bleu"])


def test_a_saved_model_loads_alone_with_its_vocabulary_and_tied_weights(tmp_path):
    """save_model writes what load_model reads without a run folder: float16 weights (one copy of the
    tied embedding matrix), the configuration and the vocabulary; other files are refused."""
    import fractions

    from transformer.checkpoint import CheckpointError
    from transformer.checkpoint import save_model
    need_corpus("multi30k", "dev")
    vocab = train_vocab(load_split("multi30k", "dev")[:300], vocab_size=500)
    torch.manual_seed(0)
    model = Transformer(TransformerConfig.preset("tiny"), len(vocab)).eval()
    path = tmp_path / "model.pt"
    save_model(model, vocab, path)
    loaded, loaded_vocab, names = load_model(path)
    assert names == ["model.pt"] and loaded_vocab.proto == vocab.proto and not loaded.training
    for (name, a), b in zip(model.state_dict().items(), loaded.state_dict().values()):
        assert b.dtype == a.dtype and torch.equal(b, a.half().float()), name
    assert loaded.src_embed.lut.weight is loaded.generator.proj.weight      # still tied
    # one float16 copy of each tensor (the tied matrix stored once), and the vocabulary with its
    # normalisation rule (torch.save's pickle writes bytes as latin-1 text in UTF-8: up to twice
    # their length)
    assert path.stat().st_size < 2 * model.num_parameters() * 1.1 + 2 * len(vocab.proto)
    src = torch.tensor([vocab.encode(["Ein Hund läuft."])[0] + [EOS]])
    assert translate(loaded, loaded_vocab, ["Ein Hund läuft."], beam_size=2, progress=False)
    assert src.max() < len(vocab)

    (tmp_path / "notes.txt").write_text("not a model")
    with pytest.raises(ValueError, match="is not a model written by save_model"):
        load_model(tmp_path / "notes.txt")
    torch.save({"model": model.state_dict()}, tmp_path / "checkpoint_like.pt")
    with pytest.raises(ValueError, match=r"neither a model written by save_model .* nor a training checkpoint"):
        load_model(tmp_path / "checkpoint_like.pt")
    torch.save({"format": "transformer-model/1", "note": fractions.Fraction(1, 3)}, tmp_path / "odd.pt")
    with pytest.raises(CheckpointError):
        load_model(tmp_path / "odd.pt")


def test_translate_runs_the_readable_or_the_fast_decoders_to_the_same_tokens():
    vocab = train_vocab(list(zip(SOURCES, REFERENCES)) * 20, vocab_size=300)
    torch.manual_seed(0)
    model = Transformer(TransformerConfig.preset("tiny", max_len=64), len(vocab)).eval()
    for beam in (1, 4):
        fast = translate(model, vocab, SOURCES, beam, max_extra=8, progress=False)
        assert translate(model, vocab, SOURCES, beam, max_extra=8, progress=False,
                         search="readable") == fast
    with pytest.raises(ValueError, match="'fast' or 'readable'"):
        translate(model, vocab, SOURCES, search="quick")
    with pytest.raises(ValueError, match="take no constraint"):
        translate(model, vocab, SOURCES, search="readable", constrain=lambda batch: None)


def test_length_batches_fill_up_to_the_longest_possible_output():
    from transformer.decode import length_batches
    # by length: 1 (len 1), 2 (3), 0 (5), 3 (8); a batch costs sentences x beam x (longest + max_extra)
    # [1, 2]: 2 x 2 x (3 + 2) = 20, exactly the budget; adding 0 would cost 3 x 2 x 7 = 42
    assert length_batches([5, 1, 3, 8], beam_size=2, max_extra=2, batch_tokens=20) == [[1, 2], [0], [3]]
    assert length_batches([5, 1, 3, 8], beam_size=2, max_extra=2, batch_tokens=19) == [[1], [2], [0], [3]]
    # a sentence longer than the budget still gets a batch of its own
    assert length_batches([50], beam_size=4, max_extra=50, batch_tokens=10) == [[0]]
    assert length_batches([], 4, 50, 100) == []


def test_sacre_bleu_is_cased_unless_asked_otherwise():
    hyps, refs = ["ein Hund rennt über die Wiese ."], ["Ein Hund rennt über die Wiese ."]
    cased, signature = sacre_bleu(hyps, refs)
    lowered, signature_lc = sacre_bleu(hyps, refs, lowercase=True)
    assert cased < 100 and lowered == pytest.approx(100.0)
    assert "case:mixed" in signature and "case:lc" in signature_lc


def test_evaluate_run_wants_a_source_and_a_reference_file_together(tmp_path):
    (tmp_path / "src.en").write_text("a\n")
    with pytest.raises(ValueError, match="give both a source file and a reference file, or neither"):
        evaluate_run(tmp_path, src=tmp_path / "src.en")
    with pytest.raises(ValueError, match="give both a source file and a reference file, or neither"):
        evaluate_run(tmp_path, ref=tmp_path / "src.en")


def test_evaluate_run_scores_a_pair_of_files_cased_and_lowercased(finished_run, tmp_path, monkeypatch):
    run, root, calls = finished_run
    src, ref = tmp_path / "in.en", tmp_path / "ref.de"
    src.write_text("\n".join(SOURCES[:3]) + "\n", encoding="utf-8")
    # the oracle's output, against references that differ in case (one word) and in one word
    refs = ["Ein Hund rennt im Park .", "zwei Männer spielen heute Fußball .", "die Post kam gestern an ."]
    ref.write_text("\n".join(refs) + "\n", encoding="utf-8")
    result = evaluate_run(run, src=src, ref=ref, progress=False)
    assert result["sources"] == SOURCES[:3] and result["references"] == refs
    assert result["hypotheses"] == REFERENCES[:3] and result["sentences"] == 3
    assert (result["corpus"], result["split"]) == (None, str(src))
    import sacrebleu
    cased = sacrebleu.corpus_bleu(REFERENCES[:3], [refs]).score
    lowered = sacrebleu.corpus_bleu(REFERENCES[:3], [refs], lowercase=True).score
    assert cased < lowered < 100 and round(lowered, 2) != round(lowered, 3)
    assert result["sacrebleu"] == round(cased, 2) and result["sacrebleu_lowercase"] == round(lowered, 2)
    assert "case:lc" in result["sacrebleu_lowercase_signature"]
    ref.write_text("\n".join(refs[:2]) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match="has 3 lines but .* has 2: they must be line-aligned"):
        evaluate_run(run, src=src, ref=ref, progress=False)
    # files from another system: CR or CRLF ends a line too, as in translate's input
    src.write_bytes("\r".join(SOURCES[:3]).encode("utf-8") + b"\r")
    ref.write_bytes("\r\n".join(refs).encode("utf-8"))
    again = evaluate_run(run, src=src, ref=ref, progress=False)
    assert again["sources"] == SOURCES[:3] and again["references"] == refs and again["sentences"] == 3


def test_a_whole_number_of_at_least_one(capsys):
    import argparse
    from transformer.cli import positive_int
    assert positive_int("1") == 1 and positive_int("12") == 12
    for bad in ("0", "-3", "x", "1.5", ""):
        with pytest.raises(argparse.ArgumentTypeError, match=f"expected a whole number of at least 1, got {bad!r}"):
            positive_int(bad)


def test_the_evaluation_command_scores_files_and_refuses_bad_requests_with_one_line(finished_run, tmp_path,
                                                                                     capsys):
    run, root, _ = finished_run
    src, ref = tmp_path / "in.en", tmp_path / "ref.de"
    src.write_text("\n".join(SOURCES) + "\n", encoding="utf-8")
    ref.write_text("\n".join(REFERENCES) + "\n", encoding="utf-8")
    main([str(run), "--src", str(src), "--ref", str(ref), "--device", "cpu"])
    out, err = capsys.readouterr()
    printed = json.loads(out)
    assert printed["split"] == str(src) and printed["sentences"] == 4 and printed["sacrebleu"] == pytest.approx(100)
    assert json.dumps(printed, indent=1) == out.strip()
    assert err.splitlines()[-1].split("\r")[-1].startswith(
        "BLEU 100.0 (sacreBLEU, cased; 100.0 lowercased) on 4 sentences of ")
    assert "averaging 2 checkpoint(s)" in err and "translations in" not in err
    ref.write_text("one line\n", encoding="utf-8")
    with pytest.raises(SystemExit) as stop:
        main([str(run), "--src", str(src), "--ref", str(ref)])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and err.startswith("python -m transformer.evaluate: error: ")
    assert "they must be line-aligned" in err and "usage:" not in err
    with pytest.raises(SystemExit) as stop:
        main([str(run), "--src", str(src)])
    assert stop.value.code == 2 and "give both a source file and a reference file" in capsys.readouterr().err


def test_the_evaluation_command_describes_every_option(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    usage = " ".join(capsys.readouterr().out.split())
    for text in ("MODEL a training run folder, or a model file (save_model's, or one training checkpoint)",
                 "--split SPLIT the split of the run's corpus to score (default test)",
                 "--src SRC score on this source file instead of a split (one sentence a line; needs --ref)",
                 "--ref REF the reference translations of --src",
                 "--alpha ALPHA length penalty exponent (default 0.6)",
                 "--data-dir DATA_DIR corpus cache directory (default $TRANSFORMER_DATA)",
                 "--device DEVICE cpu, cuda or cuda:N (default: a GPU if there is one)",
                 "examples: python -m transformer.evaluate runs/m30k"):
        assert text in usage, text


def test_the_evaluation_command_names_what_it_cannot_use(finished_run, tmp_path, capsys):
    run, root, _ = finished_run
    with pytest.raises(SystemExit) as stop:
        main([str(tmp_path / "nothing")])
    assert stop.value.code == 2 and "no run folder or model file" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main([str(run), "--hyps", str(tmp_path / "missing" / "out.de")])
    assert f"the folder {tmp_path / 'missing'} does not exist" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main([str(run), "--hyps", str(tmp_path)])
    assert "is a folder; give a file name" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main([str(run), "--src", str(tmp_path / "absent.en"), "--ref", str(tmp_path / "absent.de")])
    assert "absent.en: no such file" in capsys.readouterr().err
    (tmp_path / "bare").mkdir()
    with pytest.raises(ValueError, match="has no profile.json naming its corpus"):
        evaluate_run(tmp_path / "bare")
    if not torch.cuda.is_available():
        with pytest.raises(SystemExit):
            main([str(run), "--device", "cuda"])
        assert "no CUDA GPU" in capsys.readouterr().err


def test_the_evaluation_command_says_where_it_wrote_the_translations(finished_run, capsys):
    run, root, _ = finished_run
    main([str(run), "--split", "dev", "--data-dir", str(root)])
    summary = capsys.readouterr().err.rstrip().splitlines()[-1]
    assert summary.endswith("averaging 2 checkpoint(s)")
    main([str(run), "--split", "dev", "--data-dir", str(root), "--hyps", str(run / "h.de")])
    # the score first (a file that cannot be written must not cost it), then where the translations went
    *_, score, where = capsys.readouterr().err.rstrip().splitlines()
    assert score.startswith("BLEU ") and where == f"translations in {run / 'h.de'}"


def test_the_shipped_model_file_is_scored_on_its_own_corpus_without_src_and_ref(tmp_path):
    """`evaluate results/multi30k-cpu/model.pt` asked for --src and --ref: a model file takes the corpus of the
    profile.json beside it when that profile describes the model (the shipped model sits beside its run's);
    the same file elsewhere, or beside another run's profile, still asks for them."""
    import shutil
    from transformer.evaluate import corpus_of
    from transformer.run import SHIPPED_MODEL
    need_corpus("multi30k", "test")
    assert corpus_of(SHIPPED_MODEL) == "multi30k"
    result = evaluate_run(SHIPPED_MODEL, "test", beam_size=1, max_sentences=3, progress=False)
    assert result["sentences"] == 3 and result["split"] == "test"
    alone = tmp_path / "alone"
    alone.mkdir()
    shutil.copy(SHIPPED_MODEL, alone / "model.pt")
    with pytest.raises(ValueError, match="give --src and --ref"):
        evaluate_run(alone / "model.pt", "test", beam_size=1, max_sentences=3, progress=False)
    other = json.loads((SHIPPED_MODEL.parent / "profile.json").read_text())
    other["vocab_size"] += 1
    (alone / "profile.json").write_text(json.dumps(other))
    assert corpus_of(alone / "model.pt") is None
