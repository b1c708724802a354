"""A translator a practitioner can call: the Translator API, python -m transformer.translate, the shipped
model, evaluate on any pair of files, and the package's public face (version, typing marker)."""
import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import transformer
from transformer.run import load_model
from transformer.decode import translate
from transformer.evaluate import main as evaluate_main
from transformer.run import SHIPPED_MODEL
from transformer.translate import Translator, main

ROOT = Path(__file__).resolve().parents[1]
SENTENCES = ["Two dogs are playing in the snow.", "", "A man in a blue shirt is riding a bike."]


@pytest.fixture(scope="module")
def greedy():
    if not SHIPPED_MODEL.exists():
        pytest.skip("the shipped model is not in this checkout")
    return Translator.from_run(beam_size=1)


def test_the_translator_loads_the_shipped_model_and_keeps_lines_aligned(greedy):
    assert "model.pt" in repr(greedy) and "beam_size=1" in repr(greedy)
    out = greedy.translate(SENTENCES)
    assert len(out) == 3 and out[1] == "" and all(out[i] for i in (0, 2))
    model, vocab, _ = load_model(SHIPPED_MODEL)
    assert out[0] == translate(model, vocab, [SENTENCES[0]], beam_size=1, progress=False)[0]
    assert greedy.translate(SENTENCES[0]) == out[0]             # a str in, a str out
    assert transformer.Translator is Translator                 # exported at the top level


def test_the_command_reads_standard_input_and_writes_one_line_each(greedy):
    res = subprocess.run([sys.executable, "-W", "error::RuntimeWarning", "-m", "transformer.translate",
                          "--beam", "1"], input="\n".join(SENTENCES) + "\n", capture_output=True, text=True,
                         cwd=ROOT, env={**os.environ, "OMP_NUM_THREADS": "1"}, timeout=300)
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines() == greedy.translate(SENTENCES)


def test_the_command_translates_a_file_into_a_file(greedy, tmp_path):
    src, out = tmp_path / "in.en", tmp_path / "out.de"
    src.write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    main([str(SHIPPED_MODEL), "--input", str(src), "--output", str(out), "--beam", "1"])
    assert out.read_text(encoding="utf-8").splitlines() == greedy.translate(SENTENCES)


@pytest.mark.parametrize("args", [["--beam", "0"], ["--input", "no/such/file.en"], ["--output", "/"],
                                  ["--output", "no/such/folder/out.de"], ["no/such/run"], ["--average", "-2"]])
def test_the_command_refuses_bad_requests_with_one_line(args, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_:
        main(args)
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "error:" in err and "Traceback" not in err


def test_help_lists_every_option_with_a_description_and_examples(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    text = capsys.readouterr().out
    for option in ("--input", "--output", "--beam", "--alpha", "--average", "--device", "--batch-tokens"):
        line = next(line for line in text.splitlines() if line.strip().startswith(option))
        assert len(line.split()) > 2 or option in ("--average", "--batch-tokens"), line
    assert "examples:" in text and "image captions" in text


def test_every_command_spells_the_averaging_option_alike(capsys):
    from transformer import deploy, evaluate, translate as translate_module
    for module in (evaluate, deploy, translate_module):
        with pytest.raises(SystemExit):
            module.main(["--help"])
        text = capsys.readouterr().out
        assert "--average AVERAGE" in text and "--average-last" not in text, module.__name__


def test_evaluate_scores_any_pair_of_files(greedy, tmp_path, capsys):
    src, ref = tmp_path / "src.en", tmp_path / "ref.de"
    src.write_text("\n".join(SENTENCES[::2]) + "\n", encoding="utf-8")
    ref.write_text("\n".join(greedy.translate(SENTENCES[::2])) + "\n", encoding="utf-8")
    evaluate_main([str(SHIPPED_MODEL), "--src", str(src), "--ref", str(ref), "--beam", "1"])
    captured = capsys.readouterr()
    result = json.loads(captured.out)
    assert result["sacrebleu"] == pytest.approx(100.0) and result["sentences"] == 2
    assert "BLEU 100.0" in captured.err
    ref.write_text("only one line\n", encoding="utf-8")
    with pytest.raises(SystemExit) as exit_:
        evaluate_main([str(SHIPPED_MODEL), "--src", str(src), "--ref", str(ref)])
    assert exit_.value.code == 2 and "line-aligned" in capsys.readouterr().err


def test_the_package_says_its_version_and_that_it_is_typed():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert transformer.__version__ == project["version"]
    assert (Path(transformer.__file__).parent / "py.typed").exists()


def test_every_public_function_keeps_the_promise_of_py_typed():
    """py.typed tells type checkers the package is annotated: every public function and method says the
    types of its parameters and (but for __init__) of its result."""
    import ast
    bare = []
    for path in sorted((ROOT / "transformer").glob("*.py")):
        def visit(nodes, prefix=""):
            for node in nodes:
                if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                    visit(node.body, f"{prefix}{node.name}.")
                if not isinstance(node, ast.FunctionDef) or (node.name.startswith("_")
                                                             and node.name != "__init__"):
                    continue
                if "__mutmut_" in node.name:     # mutation testing's copies of a function
                    continue
                a = node.args
                params = [p for p in a.posonlyargs + a.args + a.kwonlyargs + [a.vararg, a.kwarg]
                          if p is not None and p.arg not in ("self", "cls")]
                if any(p.annotation is None for p in params) or (node.returns is None
                                                                 and node.name != "__init__"):
                    bare.append(f"{path.stem}.{prefix}{node.name}")
        visit(ast.parse(path.read_text()).body)
    assert not bare, f"{len(bare)} public functions without type hints: {bare[:10]}"


def test_the_run_record_s_command_can_be_pasted_back(monkeypatch):
    import shlex
    from transformer.runlog import command_line
    monkeypatch.setattr(sys, "argv", ["transformer/train.py", "--out", "my runs/a b", "--set", "name='x y'"])
    assert shlex.split(command_line())[-4:] == ["--out", "my runs/a b", "--set", "name='x y'"]


def test_a_wheel_finds_the_shipped_model_in_the_data_folder(tmp_path, monkeypatch):
    """After a wheel install, Translator.from_run() raised FileNotFoundError: the wheel does not carry the
    model. The site's model.pt saved in the data folder is the shipped model; without it, the error says
    where to put it."""
    import shutil
    from transformer import translate
    from transformer.run import SHIPPED_MODEL
    if not SHIPPED_MODEL.is_file():
        pytest.skip("the shipped model is not in this checkout")
    monkeypatch.setattr(translate, "SHIPPED_MODEL", tmp_path / "not-in-a-wheel" / "model.pt")
    monkeypatch.setenv("TRANSFORMER_DATA", str(tmp_path / "data"))
    with pytest.raises(FileNotFoundError, match=r"save the book site's downloads/model\.pt there"):
        Translator.from_run()
    (tmp_path / "data").mkdir()
    shutil.copy(SHIPPED_MODEL, tmp_path / "data" / "model.pt")
    assert Translator.from_run(beam_size=1).translate(["A dog runs."])[0]
