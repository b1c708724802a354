"""Nothing lost, nothing garbled where the package writes files: a run file is written whole or not at
all, a damaged one is named with what to do, no output replaces the model or the input it reads, two
writers of one output never share a temporary file, a run killed before its first checkpoint starts
again, and the API takes one sentence as one sentence."""
import errno
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import asdict
from types import SimpleNamespace

import pytest

from tests.test_edges import ROOT, TWO, greedy, run_main, small_model  # noqa: F401 (fixtures)
from tests.test_runs_kept import QUIET, finished, run, snapshot, tiny  # noqa: F401 (fixtures)
from transformer.data import atomic_file
from transformer.profiles import get_profile
from transformer.run import (DATA_MANIFEST, PROFILE, RUN_INFO, check_run_data, checkpoint_paths, run_profile,
                             write_profile)
from transformer.runlog import machines_of, record_run_info
from transformer.translate import main as translate_main


# ------------------------------------------------------------- whole or not at all --

def full_disk_after(n_bytes):
    """A Path.write_text that writes the first n_bytes and then finds the disk full."""
    def write_text(self, data, *args, **kwargs):
        with open(self, "w") as f:
            f.write(data[:n_bytes])
        raise OSError(errno.ENOSPC, "No space left on device")
    return write_text


def test_a_full_disk_at_a_resume_keeps_the_run_files_whole(tmp_path, monkeypatch):
    runtime = SimpleNamespace(device="cpu", world=1)
    record_run_info(tmp_path, runtime)
    record_run_info(tmp_path, runtime)
    write_profile(tmp_path, get_profile("tiny"))
    before = {name: (tmp_path / name).read_bytes() for name in (RUN_INFO, PROFILE)}
    monkeypatch.setattr(pathlib.Path, "write_text", full_disk_after(100))
    with pytest.raises(OSError):
        record_run_info(tmp_path, runtime)
    with pytest.raises(OSError):
        write_profile(tmp_path, get_profile("tiny", max_steps=99))
    monkeypatch.undo()
    assert {name: (tmp_path / name).read_bytes() for name in (RUN_INFO, PROFILE)} == before
    assert len(json.loads(before[RUN_INFO])) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([RUN_INFO, PROFILE])   # no temporary left


@pytest.mark.parametrize("name", [PROFILE, DATA_MANIFEST, RUN_INFO])
def test_a_damaged_run_file_is_named_with_what_to_do(name, tmp_path):
    (tmp_path / name).write_text('{"corpus": "multi30k", "vocab', encoding="utf-8")    # cut at byte 30
    read = {PROFILE: lambda: run_profile(tmp_path),
            DATA_MANIFEST: lambda: check_run_data(get_profile("tiny"), tmp_path),
            RUN_INFO: lambda: machines_of(tmp_path)}[name]
    with pytest.raises(ValueError, match=rf"{tmp_path / name} is damaged .*: it was cut short or edited; "
                                         r"(the run's train command|it names|it holds)"):
        read()
    if name == RUN_INFO:                  # and a resume refuses it before it adds a start
        with pytest.raises(ValueError, match="move it aside"):
            record_run_info(tmp_path, SimpleNamespace(device="cpu", world=1))


def test_the_train_command_names_a_damaged_data_manifest(tmp_path, capsys):
    from transformer.train import main as train_main
    (tmp_path / DATA_MANIFEST).write_text("{", encoding="utf-8")
    (tmp_path / ".lock").write_text("")                        # a run folder's, as every run has
    code, _ = run_main(train_main, ["--profile", "tiny", "--out", str(tmp_path), "--no-progress"], capsys)
    # sys.exit(message): the one line the user sees, exit status 1
    assert isinstance(code, str) and code.startswith(f"error: {tmp_path / DATA_MANIFEST} is damaged")


# ---------------------------------------------------------- temporary files --

def test_two_writers_of_one_file_get_their_own_temporary_files_and_a_user_s_part_is_kept(tmp_path):
    dest = tmp_path / "out.de"
    mine = tmp_path / "out.de.part"                 # a file of the user's, by the old fixed name
    mine.write_text("keep me")
    with atomic_file(dest) as first, atomic_file(dest) as second:
        assert first != second and first.parent == second.parent == tmp_path
        first.write_text("one\n")
        second.write_text("two\n")
    assert dest.read_text() == "one\n" and mine.read_text() == "keep me"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.de", "out.de.part"]


def test_an_output_keeps_its_link_and_its_permissions(tmp_path):
    target, link = tmp_path / "real.de", tmp_path / "link.de"
    target.write_text("old\n")
    os.chmod(target, 0o600)
    link.symlink_to(target)
    with atomic_file(link) as tmp:
        tmp.write_text("new\n")
    assert link.is_symlink() and target.read_text() == "new\n"
    assert oct(target.stat().st_mode & 0o777) == oct(0o600)
    umask = os.umask(0o022)
    try:
        with atomic_file(tmp_path / "fresh.de") as tmp:
            tmp.write_text("x\n")
    finally:
        os.umask(umask)
    assert oct((tmp_path / "fresh.de").stat().st_mode & 0o777) == oct(0o644)   # not mkstemp's 0600


def test_a_translate_stopped_by_sigterm_keeps_the_old_output_and_leaves_nothing(small_model, tmp_path):
    out = tmp_path / "out.de"
    out.write_text("yesterday\n", encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "transformer.translate", str(small_model), "--beam", "1",
                             "--output", str(out)], stdin=subprocess.PIPE, stderr=subprocess.PIPE,
                            cwd=tmp_path, env=env)
    proc.stdin.write(b"A dog runs.\n")
    proc.stdin.flush()
    deadline = time.time() + 60
    # wait until the output's temporary file exists: the command is writing
    while not [p for p in tmp_path.iterdir() if p.name.startswith(".out.de.")] and time.time() < deadline:
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    err = proc.communicate(timeout=60)[1].decode()
    assert proc.returncode == 130 and "interrupted; " in err and "Traceback" not in err, err
    assert out.read_text(encoding="utf-8") == "yesterday\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.de"]


# ------------------------------------------------- outputs that would replace inputs --

@pytest.fixture
def model_copy(small_model, tmp_path):
    path = tmp_path / "q.pt"
    shutil.copy(small_model, path)
    (tmp_path / "caps.en").write_text(TWO, encoding="utf-8")
    (tmp_path / "caps.de").write_text(TWO, encoding="utf-8")
    return path


def test_translate_and_evaluate_refuse_to_write_over_the_model(model_copy, tmp_path, capsys):
    from transformer.evaluate import main as evaluate_main
    before = model_copy.read_bytes()
    code, err = run_main(translate_main, [str(model_copy), "--input", str(tmp_path / "caps.en"),
                                          "--output", str(model_copy)], capsys)
    assert code == 2 and f"{model_copy} is also the input {model_copy}" in err
    code, err = run_main(evaluate_main, [str(model_copy), "--src", str(tmp_path / "caps.en"), "--ref",
                                         str(tmp_path / "caps.de"), "--hyps", str(model_copy)], capsys)
    assert code == 2 and "is also the input" in err
    assert model_copy.read_bytes() == before


def test_deploy_refuses_to_pack_into_the_run_it_reads(tmp_path, capsys):
    from transformer import Transformer, TransformerConfig
    from transformer.deploy import main as deploy_main
    from transformer.run import save_checkpoint
    from transformer.translate import Translator
    vocab = Translator.from_run(beam_size=1).vocab if (ROOT / "results" / "multi30k-cpu" / "model.pt").exists() \
        else pytest.skip("no shipped model")
    cfg = TransformerConfig(N=1, d_model=16, d_ff=32, h=2, max_len=32)
    run = tmp_path / "run"
    save_checkpoint(run, 5, {"step": 5, "model": Transformer(cfg, len(vocab)).state_dict(),
                             "model_config": asdict(cfg), "vocab": vocab.proto}, keep=1)
    newest = checkpoint_paths(run)[-1]
    before = newest.read_bytes()
    code, err = run_main(deploy_main, [str(run), str(newest), "--pack"], capsys)
    assert code == 2 and f"is inside {run}, which the command reads" in err
    assert newest.read_bytes() == before


def test_translate_refuses_an_output_that_is_its_standard_input(small_model, tmp_path):
    text = tmp_path / "in.en"
    text.write_text(TWO, encoding="utf-8")
    with open(text, "rb") as stdin:
        done = subprocess.run([sys.executable, "-m", "transformer.translate", str(small_model), "--beam", "1",
                               "--output", str(text)], stdin=stdin, capture_output=True,
                              env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)
    assert done.returncode == 2 and b"is also the standard input" in done.stderr
    assert text.read_text(encoding="utf-8") == TWO


def test_an_output_of_dash_is_standard_output(small_model, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "in.en").write_text(TWO, encoding="utf-8")
    code, _ = run_main(translate_main, [str(small_model), "--input", "in.en", "--output", "-", "--beam", "1"],
                       capsys)
    assert code == 0 and not (tmp_path / "-").exists()


# ------------------------------------------------- a run killed before its first checkpoint --

def test_a_run_killed_before_its_first_checkpoint_starts_again_with_the_same_command(run):
    from transformer.train import train
    for path in checkpoint_paths(run):
        path.unlink()
    log = run / "train_log.csv"
    lines = log.read_text().splitlines(keepends=True)
    log.write_text("".join(lines[:4]))                          # steps 1-3; the first save is at step 4
    (run / "dev_log.csv").unlink(missing_ok=True)
    kept = log.read_bytes()
    messages = []
    summary = train(tiny(), run, log=messages.append, **QUIET)
    assert summary["steps"] == 12
    assert any("before its first checkpoint" in m for m in messages)
    assert (run / "train_log.csv.before-start-over").read_bytes() == kept


def test_a_run_killed_while_its_first_checkpoint_was_being_made_starts_again(run):
    """Killed after step 4 was logged (its first saving step) but before the checkpoint was written (the dev
    score comes first), the run was refused three times out of three with "is the disk that holds them
    mounted?": a saving step proves a checkpoint only once a later step is logged."""
    from transformer.run import could_have_saved
    from transformer.train import train
    for path in checkpoint_paths(run):
        path.unlink()
    log = run / "train_log.csv"
    lines = log.read_text().splitlines(keepends=True)
    log.write_text("".join(lines[:5]))                          # steps 1-4: the save at step 4 unfinished
    assert not could_have_saved(run, tiny())
    log.write_text("".join(lines[:6]))                          # step 5 logged: step 4's checkpoint was made
    assert could_have_saved(run, tiny())
    log.write_text("".join(lines[:5]))
    messages = []
    assert train(tiny(), run, log=messages.append, **QUIET)["steps"] == 12
    assert any("before its first checkpoint" in m for m in messages)


@pytest.mark.parametrize("damaged", ["data.pt", "vocab.model", "pickled data.pt"])
def test_a_run_with_damaged_prepared_data_is_refused_by_name(run, damaged):
    """A damaged data.pt or vocab.model gave a raw traceback, and a data.pt holding a pickled object gave
    PyTorch's advice to load it with weights_only=False, which must never be followed: each is named, with
    what to do, and nothing is changed."""
    import datetime
    import pickle
    from transformer.train import train
    if damaged == "pickled data.pt":
        with open(run / "data.pt", "wb") as f:
            pickle.dump({"train": datetime.date(2026, 1, 1)}, f, protocol=2)
    else:
        (run / damaged).write_bytes(b"not what it was")
    for path in checkpoint_paths(run):
        path.unlink()                                           # so that the data is read at all
    (run / "train_log.csv").unlink()
    before = snapshot(run)
    with pytest.raises(ValueError) as err:
        train(tiny(max_steps=16), run, log=lambda msg: None, **QUIET)
    text = str(err.value)
    assert "prepared data" in text and "Move both aside" in text and "weights_only" not in text
    assert snapshot(run) == before


# ------------------------------------------------------------------------ the API --

def test_nbest_takes_one_sentence_as_one_sentence(greedy):
    sentence = "A man is walking."
    one = greedy.nbest(sentence, 1)
    assert len(one) == 1 and isinstance(one[0][0], str) and isinstance(one[0][1], float)
    assert one == greedy.nbest([sentence], 1)[0]


def test_the_tokenised_bleu_does_not_tell_the_user_to_detokenise(caplog):
    from transformer.evaluate import tokenized_bleu
    lines = [f"Ein Hund rennt {i} ." for i in range(120)]      # tokenised here, on purpose
    with caplog.at_level("WARNING"):
        assert tokenized_bleu(lines, lines)[0] == pytest.approx(100.0)
    assert "detokenize" not in caplog.text


def test_the_names_loaded_on_first_use_are_typed_for_type_checkers():
    """`from transformer import Translator, load_model` is typed: each name that __getattr__ loads is also
    imported under TYPE_CHECKING, from the module __getattr__ loads it from."""
    import ast
    tree = ast.parse((ROOT / "transformer" / "__init__.py").read_text())
    lazy, typed = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == "__getattr__":
            lazy |= {(n.module, a.name) for n in ast.walk(node) if isinstance(n, ast.ImportFrom) for a in n.names}
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            typed |= {(n.module, a.name) for n in node.body if isinstance(n, ast.ImportFrom) for a in n.names}
    assert lazy == {("transformer.translate", "Translator"), ("transformer.run", "load_model")}
    assert lazy <= typed


def test_a_model_read_while_its_run_rotates_a_checkpoint_away_loads_the_newest(run, monkeypatch):
    import transformer.run as run_module
    from transformer.run import load_model
    real, calls = run_module.average_checkpoints, []

    def rotated_on_first_read(paths, newest=None):
        calls.append(paths)
        if len(calls) == 1:
            paths[0].unlink()                  # the trainer's rotation, between listing and reading
        return real(paths, newest=newest)

    monkeypatch.setattr(run_module, "average_checkpoints", rotated_on_first_read)
    _, _, used = load_model(run, log=lambda msg: None)
    assert len(calls) == 2 and used == [p.name for p in checkpoint_paths(run)]


# ------------------------------------------------ no corpus and no network: one line --

@pytest.mark.parametrize("command", ["evaluate", "web", "variations"])
def test_no_corpus_and_no_network_is_one_line(command, tmp_path, monkeypatch, capsys):
    from transformer import corpora, evaluate, variations, web

    def offline(url, dest, desc=None, **kwargs):
        raise corpora.DownloadError(f"could not download {url} to {dest}: no network")

    monkeypatch.setattr(corpora, "download", offline)
    monkeypatch.setenv("TRANSFORMER_DATA", str(tmp_path / "empty"))
    run = ROOT / "results" / "multi30k-cpu"
    main, args = {"evaluate": (evaluate.main, [str(run)]),
                  "web": (web.main, [str(run / "model.pt"), "--out", str(tmp_path / "m.js")]),
                  "variations": (variations.main, ["base", "--epochs", "1", "--runs", str(tmp_path / "runs"),
                                                   "--results", str(tmp_path / "results")])}[command]
    code, err = run_main(main, args, capsys)
    text = code if isinstance(code, str) else err
    assert code not in (0, None) and "could not download" in text and "Traceback" not in err, (code, err)
    assert not (tmp_path / "m.js").exists()


def test_a_full_disk_while_translating_is_one_line_and_keeps_the_old_file(small_model, tmp_path, monkeypatch,
                                                                         capsys):
    import transformer.translate as translate_module
    src, out = tmp_path / "in.en", tmp_path / "out.de"
    src.write_text(TWO, encoding="utf-8")
    out.write_text("yesterday\n", encoding="utf-8")

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(translate_module, "write_translations", full)
    code, err = run_main(translate_main, [str(small_model), "--input", str(src), "--output", str(out)], capsys)
    assert code == 1 and f"cannot write {out}: No space left on device; {out} is unchanged" in err
    assert "Traceback" not in err and out.read_text(encoding="utf-8") == "yesterday\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.en", "out.de"]


def test_average_is_refused_for_a_model_that_is_already_one_model(small_model, capsys):
    code, err = run_main(translate_main, [str(small_model), "--average", "3"], capsys)
    assert code == 2 and "holds one model, already made" in err


def test_a_max_len_of_zero_is_refused_with_the_profile_before_any_data(tmp_path, capsys):
    from transformer.train import main as train_main
    code, err = run_main(train_main, ["--profile", "tiny", "--out", str(tmp_path / "run"), "--no-progress",
                                      "--set", "max_len=0"], capsys)
    assert code == 2 and "max_len must be at least 1, got 0" in err and not (tmp_path / "run").exists()


def test_web_names_a_results_folder_without_a_record(small_model, tmp_path, capsys):
    from transformer.web import main as web_main
    code, err = run_main(web_main, [str(small_model), "--results", str(tmp_path / "nowhere"), "--out",
                                    str(tmp_path / "m.js")], capsys)
    assert code == 2 and "holds no results.json" in err and "SHA-256" not in err


def test_commands_given_a_ctranslate2_export_say_what_it_is(small_model, tmp_path, capsys):
    pytest.importorskip("ctranslate2")
    from transformer.deploy import main as deploy_main
    from transformer.evaluate import main as evaluate_main
    from transformer.web import main as web_main
    ct2 = tmp_path / "ct2"
    assert run_main(deploy_main, [str(small_model), str(ct2)], capsys)[0] == 0
    for main, args in ((evaluate_main, [str(ct2)]), (web_main, [str(ct2), "--out", str(tmp_path / "m.js")]),
                       (deploy_main, [str(ct2), str(tmp_path / "packed.pt"), "--pack"])):
        code, err = run_main(main, args, capsys)
        assert code == 2 and "is a CTranslate2 export" in err and "train" not in err, err


def test_translate_gives_the_sigterm_handler_back(small_model, tmp_path, capsys):
    before = signal.getsignal(signal.SIGTERM)
    (tmp_path / "in.en").write_text(TWO, encoding="utf-8")
    code, _ = run_main(translate_main, [str(small_model), "--input", str(tmp_path / "in.en"), "--output",
                                        str(tmp_path / "out.de"), "--beam", "1"], capsys)
    assert code == 0 and signal.getsignal(signal.SIGTERM) is before


def test_a_new_file_beside_a_run_is_allowed_but_not_one_of_its_own(tmp_path):
    from transformer.cli import check_writable
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    (run / "profile.json").write_text("{}")
    check_writable(run / "hyps.de", [run])                       # translations beside the run: fine
    for taken in (run / "profile.json", run / "checkpoints" / "step_0000010.pt"):
        with pytest.raises(ValueError, match="which the command reads"):
            check_writable(taken, [run])


def test_a_checkpoint_that_cannot_be_written_says_so_in_one_line_and_keeps_the_last(tmp_path, monkeypatch):
    """torch.save on a full disk says only "unexpected pos 2837632 vs 2837524"; the trainer names
    the file, the free space and the likely cause, and the newest checkpoint stays whole."""
    import transformer.checkpoint as checkpoint
    from transformer.run import checkpoint_paths, save_checkpoint
    save_checkpoint(tmp_path, 1, {"step": 1}, keep=5)
    before = checkpoint_paths(tmp_path)[0].read_bytes()

    def full(obj, f):
        pathlib.Path(f).write_bytes(b"partial")
        raise RuntimeError("[enforce fail at inline_container.cc:778] . unexpected pos 2837632 vs 2837524")

    monkeypatch.setattr(checkpoint.torch, "save", full)
    with pytest.raises(checkpoint.CheckpointError) as caught:
        save_checkpoint(tmp_path, 2, {"step": 2}, keep=5)
    message = str(caught.value)
    assert "could not write" in message and "unexpected pos" in message and "MiB free" in message
    assert "full disk" in message and "\n" not in message
    assert [p.name for p in checkpoint_paths(tmp_path)] == ["step_0000001.pt"]
    assert checkpoint_paths(tmp_path)[0].read_bytes() == before
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["step_0000001.pt"]


def test_a_damaged_ctranslate2_model_is_one_line(small_model, tmp_path, capsys):
    """A model.bin cut short, or overwritten: the engine's words ("has an invalid payload size", or a
    binary version of 1651663207 "generated by a later version") become one line that says what to do."""
    pytest.importorskip("ctranslate2")
    from transformer.deploy import main as deploy_main
    ct2 = tmp_path / "ct2"
    assert run_main(deploy_main, [str(small_model), str(ct2)], capsys)[0] == 0
    src = tmp_path / "in.en"
    src.write_text(TWO, encoding="utf-8")
    whole = (ct2 / "model.bin").read_bytes()
    for damaged in (whole[:len(whole) // 3], b"garbage" * 10):
        (ct2 / "model.bin").write_bytes(damaged)
        code, err = run_main(translate_main, [str(ct2), "--input", str(src)], capsys)
        assert code not in (0, None) and "cannot be read by CTranslate2" in err, err
        assert "python -m transformer.deploy RUN_DIR" in err and "Traceback" not in err


# ------------------------------------------ outputs that are not plain files (FIFOs, devices) --

def test_an_output_that_is_a_fifo_or_a_device_is_written_into_and_stays_what_it_was(small_model, tmp_path,
                                                                                  capsys):
    """translate --output to a FIFO: its reader gets the translations, and the FIFO stays a FIFO (it was
    replaced by a regular file, and its reader got nothing); to a character device (a copy of /dev/null,
    where the user may make one): it stays a device."""
    import stat
    import threading
    (tmp_path / "in.en").write_text(TWO, encoding="utf-8")
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_text(encoding="utf-8")), daemon=True)
    reader.start()
    code, err = run_main(translate_main, [str(small_model), "--input", str(tmp_path / "in.en"), "--output",
                                          str(fifo), "--beam", "1"], capsys)
    reader.join(timeout=60)
    assert code == 0, err
    assert stat.S_ISFIFO(fifo.stat().st_mode) and len(got[0].splitlines()) == len(TWO.splitlines())
    null = tmp_path / "null"
    try:
        os.mknod(null, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("making a device needs root")
    code, err = run_main(translate_main, [str(small_model), "--input", str(tmp_path / "in.en"), "--output",
                                          str(null), "--beam", "1"], capsys)
    assert code == 0, err
    assert stat.S_ISCHR(null.stat().st_mode) and not list(tmp_path.glob(".null.*"))


def test_an_output_of_dev_stdout_is_standard_output(small_model, tmp_path):
    """--output /dev/stdout (a link to the process's own standard output, here a pipe) writes there."""
    (tmp_path / "in.en").write_text(TWO, encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "transformer.translate", str(small_model), "--beam", "1",
                           "--input", str(tmp_path / "in.en"), "--output", "/dev/stdout"], capture_output=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)
    assert done.returncode == 0, done.stderr
    assert len(done.stdout.decode().splitlines()) == len(TWO.splitlines())


@pytest.mark.parametrize("ending", [b"\r", b"\r\n", b"\n"])
def test_every_line_end_ends_a_line_in_a_file_and_in_a_pipe(small_model, tmp_path, capsys, monkeypatch, ending):
    """A file with CR-only line ends (old Mac files) was read as one line: 3 sentences in, 1 translation out.
    CR, CRLF and LF all end lines, from --input and from standard input alike, read in pieces or whole."""
    import io
    from transformer.translate import line_groups
    three = ending.join([b"A dog runs.", b"Two men sit.", b"A girl sings."]) + ending
    (tmp_path / "in.en").write_bytes(three)
    code, err = run_main(translate_main, [str(small_model), "--input", str(tmp_path / "in.en"), "--output",
                                          str(tmp_path / "out.de"), "--beam", "1"], capsys)
    assert code == 0, err
    assert len((tmp_path / "out.de").read_text(encoding="utf-8").splitlines()) == 3

    class Trickle(io.BytesIO):      # a pipe that delivers a byte at a time: a CRLF split across reads
        def read1(self, n=-1):
            return self.read(1)
    assert [line for _, group in line_groups(Trickle(three), "pipe") for line in group] == [
        "A dog runs.", "Two men sit.", "A girl sings."]


def test_a_folder_given_as_input_is_one_line(small_model, tmp_path, capsys):
    code, err = run_main(translate_main, [str(small_model), "--input", str(tmp_path), "--beam", "1"], capsys)
    assert code == 2 and "is a folder" in err and "Traceback" not in err


def test_a_log_row_cut_short_is_dropped_when_the_run_resumes(tmp_path):
    """After a full disk, dev_log.csv kept `30,...,21` where the value was 217.118: the last row of a file that
    does not end with its line end is not whole, and a resume drops it with the rows after the checkpoint."""
    from transformer.runlog import truncate_log
    log = tmp_path / "dev_log.csv"
    log.write_text("step,dev_ppl\r\n10,300.5\r\n20,250.25\r\n30,21", encoding="utf-8")
    truncate_log(log, ["step", "dev_ppl"], 100)
    assert log.read_text(encoding="utf-8").splitlines() == ["step,dev_ppl", "10,300.5", "20,250.25"]
    log.write_text("step,loss,lr\r\n10,5.5,0.001\r\n20,4.5,", encoding="utf-8")   # fewer fields, cut
    truncate_log(log, ["step", "loss", "lr"], 100)
    assert log.read_text(encoding="utf-8").splitlines() == ["step,loss,lr", "10,5.5,0.001"]
    truncate_log(log, ["step", "loss", "lr"], 5)                                     # after the checkpoint
    assert log.read_text(encoding="utf-8").splitlines() == ["step,loss,lr"]


def test_a_file_given_as_input_is_read_a_group_of_lines_at_a_time(small_model, tmp_path, capsys, monkeypatch):
    """A 250 MB --input file was read whole (3.3 GB held, 90 s before the first output, and 40 s to obey
    SIGTERM inside one long encode): a file streams as a pipe does, in groups of at most 256 lines, each
    translated and written before the next is read, with progress on stderr."""
    from transformer import translate
    groups = []
    real = translate.write_translations
    monkeypatch.setattr(translate, "write_translations",
                        lambda translator, lines, first, *args, **kw: groups.append((first, len(lines)))
                        or real(translator, lines, first, *args, **kw))
    (tmp_path / "in.en").write_text("A dog runs.\n" * 600, encoding="utf-8")
    code, err = run_main(translate_main, [str(small_model), "--input", str(tmp_path / "in.en"), "--output",
                                          str(tmp_path / "out.de"), "--beam", "1"], capsys)
    assert code == 0, err
    assert [n for _, n in groups] == [256, 256, 88] and [f for f, _ in groups] == [1, 257, 513]
    assert len((tmp_path / "out.de").read_text(encoding="utf-8").splitlines()) == 600
    assert "600" in err and "lines" in err                     # the progress line


def test_the_temporary_files_of_writers_killed_outright_are_removed_by_the_next(tmp_path):
    """kill -9 leaves a writer's hidden .NAME.XXXX.part behind, and they piled up: the next writer of the same
    file removes those whose process on this machine is gone, and nothing else (a live writer's, a user's)."""
    import os
    import socket
    import subprocess
    import sys
    from transformer.data import atomic_file
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    host = socket.gethostname()
    dead = tmp_path / f".out.de.{host}.{gone.pid}-abcd_123.part"
    alive = tmp_path / f".out.de.{host}.{os.getppid()}-abcd_123.part"
    users = [tmp_path / ".out.de.notes.part", tmp_path / f".out.de.otherhost.{gone.pid}-abcd_123.part"]
    for path in [dead, alive, *users]:
        path.write_text("x")
    with atomic_file(tmp_path / "out.de") as tmp:
        tmp.write_text("done\n")
    assert not dead.exists() and alive.exists() and all(p.exists() for p in users)
    assert (tmp_path / "out.de").read_text() == "done\n"


def test_a_line_of_several_sentences_is_said_once_on_stderr(small_model, tmp_path, capsys):
    """A line holding several sentences got one translated, in silence: the first such line is named once on
    standard error (an abbreviation such as "Mr." does not count), and every line is still translated."""
    from transformer.translate import say_if_several
    assert not say_if_several(["Mr. Smith walks to St. Louis.", "The U.S. Army parades."], 1)
    capsys.readouterr()
    (tmp_path / "in.en").write_text("A dog runs.\nA dog runs. A man sits.\nTwo cats sleep! A bird sings.\n",
                                    encoding="utf-8")
    code, err = run_main(translate_main, [str(small_model), "--input", str(tmp_path / "in.en"), "--output",
                                          str(tmp_path / "out.de"), "--beam", "1"], capsys)
    assert code == 0 and err.count("looks like more than one sentence") == 1 and "line 2 " in err
    assert len((tmp_path / "out.de").read_text(encoding="utf-8").splitlines()) == 3


def test_the_train_command_says_a_full_disk_at_a_resume_in_one_line(run, monkeypatch, capsys):
    """A full disk when a run resumes gave a raw traceback: the command says which folder could not be
    written and what to do, and the run's files are as they were."""
    from transformer.train import main as train_main
    before = snapshot(run)
    monkeypatch.setattr(pathlib.Path, "write_text", full_disk_after(10))
    code, _ = run_main(train_main, ["--profile", "tiny", "--out", str(run), "--no-progress",
                                    "--set", "max_steps=16", "save_every_steps=4", "eval_every=1000"], capsys)
    assert isinstance(code, str) and "No space left on device" in code and "same command" in code, code
    monkeypatch.undo()
    assert {k: v for k, v in snapshot(run).items() if k.name not in ("train_log.csv", "dev_log.csv")} == {
        k: v for k, v in before.items() if k.name not in ("train_log.csv", "dev_log.csv")}
