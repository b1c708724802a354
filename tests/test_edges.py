"""Nothing lost, nothing mislabelled at the edges of the tools a user reaches for: translate's input and
output files, line breaks and byte-order marks, search settings, the browser export's label, deploy's
folders, and one line (never a traceback) for every bad request."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import need_corpus
from transformer import Transformer, TransformerConfig
from transformer.checkpoint import save_model
from transformer.run import load_model
from transformer.data import read_lines, train_vocab
from transformer.decode import TooLong, translate
from transformer.run import SHIPPED_MODEL
from transformer.translate import Translator, main

ROOT = Path(__file__).resolve().parents[1]
TWO = "A man is walking.\nTwo dogs play in the snow.\n"


@pytest.fixture(scope="module")
def greedy():
    if not SHIPPED_MODEL.exists():
        pytest.skip("the shipped model is not in this checkout")
    return Translator.from_run(beam_size=1)


def run_main(module_main, args, capsys):
    """(exit status, standard error) of a command's main(); status 0 when it returns."""
    try:
        module_main(args)
        code = 0
    except SystemExit as stop:
        code = stop.code
    return code, capsys.readouterr().err


# --------------------------------------------------------------- translate's files --

@pytest.mark.parametrize("how", ["same path", "a link to it"])
def test_an_output_that_is_the_input_is_refused_and_the_input_kept(how, greedy, tmp_path, capsys):
    src = tmp_path / "in.en"
    src.write_text(TWO, encoding="utf-8")
    out = src if how == "same path" else tmp_path / "link.de"
    if how == "a link to it":
        out.symlink_to(src)
    code, err = run_main(main, ["--input", str(src), "--output", str(out), "--beam", "1"], capsys)
    assert code == 2 and "also the input" in err and "Traceback" not in err
    assert src.read_text(encoding="utf-8") == TWO


@pytest.mark.parametrize("bad", ["too long", "not UTF-8"])
def test_a_translation_that_fails_keeps_the_old_output_file(bad, greedy, tmp_path, capsys):
    src, out = tmp_path / "in.en", tmp_path / "out.de"
    extra = (b"word " * greedy.max_len) if bad == "too long" else b"caf\xe9 au lait"
    src.write_bytes(TWO.encode() + extra + b"\n")
    out.write_text("the translations of yesterday\n", encoding="utf-8")
    code, err = run_main(main, ["--input", str(src), "--output", str(out), "--beam", "1"], capsys)
    assert code == 2 and "line 3" in err and "Traceback" not in err
    assert out.read_text(encoding="utf-8") == "the translations of yesterday\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.en", "out.de"]      # no temporary left


def test_an_over_long_line_can_be_truncated_or_skipped(greedy, tmp_path, capsys):
    src, out = tmp_path / "in.en", tmp_path / "out.de"
    src.write_text(TWO + "dog " * greedy.max_len + "\n", encoding="utf-8")
    for mode in ("truncate", "skip"):
        code, err = run_main(main, ["--input", str(src), "--output", str(out), "--beam", "1",
                                    "--too-long", mode], capsys)
        lines = out.read_text(encoding="utf-8").splitlines()
        assert code == 0 and "line 3:" in err and len(lines) == 3
        assert lines[:2] == greedy.translate(TWO.splitlines())
        assert (lines[2] == "") == (mode == "skip")
    with pytest.raises(TooLong) as err:
        greedy.translate(["fine", "dog " * greedy.max_len])
    assert err.value.index == 1


def test_lines_break_at_newlines_only_and_a_byte_order_mark_is_not_text(greedy, tmp_path, capsys):
    """str.splitlines also breaks at \\v \\f \\x1c-\\x1e \\x85 U+2028 U+2029: a 2-line file must give 2
    translations, with or without a byte-order mark in front."""
    odd = "A man\x0bis\x0cwalking\x1c\x1d\x1e\x85\u2028\u2029.\nTwo dogs play in the snow.\n"
    plain, marked = tmp_path / "plain.en", tmp_path / "marked.en"
    plain.write_text(odd, encoding="utf-8")
    marked.write_bytes(b"\xef\xbb\xbf" + odd.encode())
    assert read_lines(plain) == odd.split("\n")[:2] and read_lines(marked) == read_lines(plain)
    for src in (plain, marked):
        out = tmp_path / f"{src.stem}.de"
        assert run_main(main, ["--input", str(src), "--output", str(out), "--beam", "1"], capsys)[0] == 0
        assert len(out.read_text(encoding="utf-8").splitlines()) == 2
    assert (tmp_path / "plain.de").read_text() == (tmp_path / "marked.de").read_text()
    bom = tmp_path / "bom.en"
    bom.write_bytes(b"\xef\xbb\xbf" + TWO.encode())
    assert greedy.translate(read_lines(bom)) == greedy.translate(TWO.splitlines())


def test_standard_input_is_answered_as_it_arrives_and_a_bad_byte_is_one_line(greedy):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "transformer.translate", "--beam", "1"]
    with subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, cwd=ROOT, env=env) as proc:
        proc.stdin.write("A man is walking.\n")
        proc.stdin.flush()
        first = proc.stdout.readline()         # answered before the input ends
        proc.stdin.write("Two dogs play in the snow.\n")
        proc.stdin.close()
        rest = proc.stdout.read()
        assert proc.wait(timeout=120) == 0
    assert [first.rstrip("\n")] + rest.splitlines() == greedy.translate(TWO.splitlines())
    res = subprocess.run(cmd, input=b"fine\ncaf\xe9\n", capture_output=True, cwd=ROOT, env=env, timeout=120)
    err = res.stderr.decode()
    assert res.returncode == 2 and "line 2 is not valid UTF-8" in err and "Traceback" not in err


def test_nbest_lists_each_line_s_best_translations_with_scores(greedy, tmp_path, capsys):
    src = tmp_path / "in.en"
    src.write_text("A man is walking.\n\nTwo dogs play in the snow.\n", encoding="utf-8")
    main(["--input", str(src), "--beam", "4", "--nbest", "3"])
    rows = [line.split("\t") for line in capsys.readouterr().out.splitlines()]
    assert [r[0] for r in rows] == ["1", "1", "1", "2", "3", "3", "3"] and rows[3] == ["2", "", ""]
    scores = [float(r[1]) for r in rows if r[1]]
    assert scores[:3] == sorted(scores[:3], reverse=True) and scores[3:] == sorted(scores[3:], reverse=True)
    beam4 = Translator.from_run(beam_size=4)
    assert [rows[0][2], rows[4][2]] == beam4.translate(["A man is walking.", "Two dogs play in the snow."])
    assert run_main(main, ["--input", str(src), "--beam", "2", "--nbest", "3"], capsys)[0] == 2


@pytest.mark.parametrize("args", [["--alpha", "nan"], ["--alpha", "inf"], ["--alpha", "-1"],
                                  ["--device", "tpu"], ["--nbest", "0"], ["--batch-tokens", "0"]])
def test_search_settings_that_decode_nonsense_are_refused(args, tmp_path, capsys):
    src = tmp_path / "in.en"
    src.write_text(TWO, encoding="utf-8")
    code, err = run_main(main, ["--input", str(src), *args], capsys)
    assert code == 2 and "error:" in err and "Traceback" not in err


@pytest.mark.parametrize("settings", [dict(alpha=float("nan")), dict(alpha=-1.0), dict(batch_tokens=0),
                                      dict(beam_size=0)])
def test_the_api_refuses_the_same_settings(greedy, settings):
    with pytest.raises(ValueError):
        Translator(greedy.engine, **settings)
    with pytest.raises(ValueError):
        translate(greedy.engine.model, greedy.vocab, ["A dog."], **{"beam_size": 1, **settings})


def test_evaluate_refuses_a_split_beside_its_own_files(tmp_path, capsys):
    from transformer.evaluate import main as evaluate_main
    src = tmp_path / "in.en"
    src.write_text(TWO, encoding="utf-8")
    code, err = run_main(evaluate_main, [str(SHIPPED_MODEL), "--src", str(src), "--ref", str(src),
                                         "--split", "dev"], capsys)
    assert code == 2 and "--split" in err


# ------------------------------------------------------- models in other shapes --

@pytest.fixture(scope="module")
def small_model(tmp_path_factory):
    """An untrained small model and its vocabulary, saved as a model file."""
    need_corpus("multi30k", "dev")
    from transformer.corpora import load_split
    pairs = load_split("multi30k", "dev")[:300]
    vocab = train_vocab(pairs, vocab_size=400)
    model = Transformer(TransformerConfig(N=1, d_model=32, d_ff=64, h=4, max_len=64), len(vocab))
    path = tmp_path_factory.mktemp("model") / "small.pt"
    save_model(model, vocab, path)
    return path


def test_web_labels_a_model_only_with_its_own_record(small_model, tmp_path, capsys):
    from transformer.web import main as web_main, read_payload
    record = ROOT / "results" / "multi30k-cpu"
    code, err = run_main(web_main, [str(small_model), "--results", str(record), "--out",
                                    str(tmp_path / "m.js")], capsys)
    assert code == 2 and "not the record of" in err and not (tmp_path / "m.js").exists()
    assert run_main(web_main, [str(small_model), "--out", str(tmp_path / "m.js")], capsys)[0] == 0
    payload = read_payload(tmp_path / "m.js")
    assert payload["source"]["results"] is None and payload["gallery"] == []
    assert "test_bleu" not in payload["source"]


@pytest.mark.parametrize("case", ["missing model", "not a model", "out is a folder", "out under a file"])
def test_web_refuses_bad_paths_with_one_line(case, small_model, tmp_path, capsys):
    from transformer.web import main as web_main
    (tmp_path / "notes.txt").write_text("mine")
    model = {"missing model": tmp_path / "nope.pt", "not a model": tmp_path / "notes.txt"}.get(case, small_model)
    out = {"out is a folder": tmp_path, "out under a file": tmp_path / "notes.txt" / "m.js"}.get(
        case, tmp_path / "m.js")
    code, err = run_main(web_main, [str(model), "--out", str(out)], capsys)
    assert code == 2 and "error:" in err and "Traceback" not in err, err
    assert (tmp_path / "notes.txt").read_text() == "mine"


def test_deploy_packs_a_model_file_and_translate_reads_every_form(small_model, tmp_path, capsys):
    pytest.importorskip("ctranslate2")
    from transformer.deploy import main as deploy_main
    packed, ct2 = tmp_path / "packed.pt", tmp_path / "ct2"
    assert run_main(deploy_main, [str(small_model), str(packed), "--pack"], capsys)[0] == 0
    assert run_main(deploy_main, [str(small_model), str(ct2)], capsys)[0] == 0
    sentences = ["A dog runs.", "", "Two men sit on a bench."]
    ours = Translator.from_run(small_model, beam_size=1).translate(sentences)
    assert Translator.from_run(packed, beam_size=1).translate(sentences) == ours
    engine = Translator.from_run(ct2, beam_size=1)
    assert "CTranslate2" in repr(engine) and engine.translate(sentences)[1] == ""
    assert len(engine.nbest(sentences, 1)) == 3
    (tmp_path / "notes.txt").write_text("mine")
    code, err = run_main(deploy_main, [str(small_model), str(tmp_path / "notes.txt" / "x")], capsys)
    assert code == 2 and "is a file" in err and "Traceback" not in err
    code, err = run_main(deploy_main, [str(small_model), str(ct2), "--pack"], capsys)
    assert code == 2 and "folder" in err


def test_a_single_training_checkpoint_loads_as_a_model(tmp_path):
    from dataclasses import asdict
    from transformer.run import save_checkpoint
    vocab = Translator.from_run(beam_size=1).vocab if SHIPPED_MODEL.exists() else pytest.skip("no model")
    cfg = TransformerConfig(N=1, d_model=16, d_ff=32, h=2, max_len=32)
    model = Transformer(cfg, len(vocab))
    save_checkpoint(tmp_path, 5, {"step": 5, "model": model.state_dict(), "model_config": asdict(cfg),
                                  "vocab": vocab.proto}, keep=1)
    loaded, _, used = load_model(tmp_path / "checkpoints" / "step_0000005.pt")
    assert used == ["step_0000005.pt"] and loaded.cfg == cfg


def test_help_texts_show_examples_and_the_right_module(capsys):
    from transformer import deploy, variations, web
    for module in (deploy, variations, web):
        with pytest.raises(SystemExit):
            module.main(["--help"])
        assert "examples:" in capsys.readouterr().out, module.__name__
    with pytest.raises(SystemExit):
        deploy.main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "transformer.checkpoint.save_model" in text and "transformer.evaluate.save_model" not in text
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "default: a GPU if there is one" in " ".join(capsys.readouterr().out.split())


def test_load_model_is_at_the_top_level():
    import transformer
    assert transformer.load_model is load_model and transformer.save_model is save_model


def test_variations_refuses_zero_threads(capsys):
    from transformer.variations import main as variations_main
    code, err = run_main(variations_main, ["--threads", "0", "--list"], capsys)
    assert code == 2 and "--threads" in err
