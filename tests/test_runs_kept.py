"""Runs are never lost: what damages, interrupts or misdirects a run stops with a clear error before it
writes anything, and an interrupted run saves its step and says how to resume."""
import json
import os
import shutil
import signal
from pathlib import Path

import pytest
import torch

from tests.conftest import need_corpus
from transformer.checkpoint import CheckpointError, checkpoint_weights
from transformer.run import checkpoint_paths
from transformer.profiles import get_profile
from transformer.train import train

QUIET = dict(progress=False, device="cpu")


def tiny(**changes):
    return get_profile("tiny", **{"max_steps": 12, "save_every_steps": 4, "eval_every": 1000, **changes})


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """A finished 12-step tiny run with checkpoints at steps 4, 8 and 12."""
    need_corpus("multi30k", "train", "dev")
    out = tmp_path_factory.mktemp("finished") / "run"
    train(tiny(), out, log=lambda msg: None, **QUIET)
    return out


@pytest.fixture
def run(finished, tmp_path):
    """A copy of the finished run, free to damage."""
    return Path(shutil.copytree(finished, tmp_path / "run"))


def snapshot(folder):
    return {p.relative_to(folder): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and p.name != ".lock"}


def damage(path):
    path.write_bytes(b"\0" * 64 + path.read_bytes()[64:200])


def test_a_run_whose_checkpoints_are_all_unreadable_stops_and_keeps_everything(run):
    for path in checkpoint_paths(run):
        damage(path)
    before = snapshot(run)
    messages = []
    with pytest.raises(CheckpointError) as err:
        train(tiny(), run, log=messages.append, **QUIET)
    text = str(err.value)
    assert all(p.name in text for p in checkpoint_paths(run)) and "--start-over" in text
    assert snapshot(run) == before                          # logs, checkpoints and record untouched
    assert not any("weights_only=False" in m for m in messages)
    # starting over is a choice: the unreadable files are kept aside, not overwritten
    summary = train(tiny(), run, start_over=True, log=messages.append, **QUIET)
    assert summary["steps"] == 12
    assert sorted(p.name for p in (run / "checkpoints").glob("*.unreadable")) == \
        ["step_0000004.pt.unreadable", "step_0000008.pt.unreadable", "step_0000012.pt.unreadable"]


def test_a_damaged_newest_checkpoint_is_named_and_the_one_before_is_used(run):
    damage(checkpoint_paths(run)[-1])
    messages = []
    summary = train(tiny(max_steps=16), run, log=messages.append, **QUIET)
    warning = next(m for m in messages if "step_0000012.pt" in m)
    assert "weights_only" not in warning and "damaged" in warning
    assert any("resumed from" in m and "step_0000008.pt" in m for m in messages)
    assert summary["steps"] == 16


def test_a_refused_resume_leaves_the_run_record_as_it_was(run):
    before = snapshot(run)
    changed = tiny().replace(model={"d_model": 32, "h": 4})
    with pytest.raises(ValueError, match="other settings"):
        train(changed, run, log=lambda msg: None, **QUIET)
    assert snapshot(run) == before


def test_a_resume_with_another_vocabulary_is_refused(run, tmp_path):
    other = train(tiny(vocab_size=900, max_steps=1), tmp_path / "other", log=lambda m: None, **QUIET)
    assert other["vocab"] != 1000
    shutil.copy(tmp_path / "other" / "vocab.model", run / "vocab.model")
    with pytest.raises(ValueError, match="vocab.model"):
        train(tiny(max_steps=16), run, log=lambda msg: None, **QUIET)


def test_two_trainings_cannot_share_a_run_folder(run):
    from transformer.run import run_lock
    with run_lock(run):
        with pytest.raises(RuntimeError, match="in use"):
            train(tiny(max_steps=16), run, log=lambda msg: None, **QUIET)
    assert train(tiny(max_steps=16), run, log=lambda msg: None, **QUIET)["steps"] == 16


def test_a_folder_that_is_not_a_run_is_refused(tmp_path):
    (tmp_path / "thesis.tex").write_text("mine")
    with pytest.raises(ValueError, match="not a training run"):
        train(tiny(), tmp_path, log=lambda msg: None, **QUIET)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["thesis.tex"]


@pytest.mark.parametrize("kind", ["ctranslate2 export", "own profile.json"])
def test_a_folder_with_files_named_like_a_runs_is_not_taken_for_one(tmp_path, kind):
    """A CTranslate2 export (whose vocab.model is named like a run's) was taken as a run and its vocabulary
    overwritten; so was a folder holding a profile.json of one's own. A run is what holds a run's history
    (run_info.json) or its lock; anything else is left as it was."""
    folder = tmp_path / "folder"
    folder.mkdir()
    names = (["model.bin", "config.json", "shared_vocabulary.json", "vocab.model", "positions.json"]
             if kind == "ctranslate2 export" else ["profile.json"])
    for name in names:
        (folder / name).write_text(f"the user's {name}")
    before = snapshot(folder)
    with pytest.raises(ValueError, match="not a training run.*no run_info.json.*nothing was changed"):
        train(tiny(), folder, log=lambda msg: None, **QUIET)
    assert snapshot(folder) == before and not (folder / ".lock").exists()


def test_start_over_keeps_a_copy_of_the_profile_and_the_history_it_rewrites(run):
    for path in checkpoint_paths(run):
        path.unlink()
    before = snapshot(run)
    train(tiny(), run, start_over=True, log=lambda msg: None, **QUIET)
    for name in ("profile.json", "run_info.json"):
        assert (run / f"{name}.before-start-over").read_bytes() == before[Path(name)]
    assert len(json.loads((run / "run_info.json").read_text())) == len(json.loads(before[Path("run_info.json")])) + 1


@pytest.mark.parametrize("change", [dict(warmup_steps=0), dict(preset="huge"), dict(max_steps=0),
                                    dict(max_minutes=-1.0), dict(train_pairs=0), dict(save_every_minutes=0.0),
                                    dict(model={"d_model": 30}), dict(vocab_size=3)])
def test_settings_are_refused_when_the_profile_is_made(change):
    with pytest.raises(ValueError):
        get_profile("tiny", **change)


@pytest.mark.parametrize("args", [["--set", "warmup_steps=0"], ["--set", "preset=huge"], ["--max-steps", "0"],
                                  ["--max-minutes", "-1"], ["--set", "train_pairs=0"]])
def test_the_command_line_refuses_bad_settings_before_writing(args, tmp_path, capsys):
    from transformer.train import main
    with pytest.raises(SystemExit) as exit_:
        main(["--profile", "tiny", "--out", str(tmp_path / "run"), "--no-progress", *args])
    assert exit_.value.code == 2 and "Traceback" not in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("kind", ["file", "read-only"])
def test_an_unwritable_out_is_refused_before_the_data_is_prepared(kind, tmp_path, monkeypatch, capsys):
    from transformer import train as cli
    out = tmp_path / "out"
    if kind == "file":
        out.write_text("not a folder")
    else:
        if os.geteuid() == 0:
            pytest.skip("root writes into read-only folders")
        out.mkdir(mode=0o500)
    monkeypatch.setattr(cli, "prepare_data", lambda *a, **k: pytest.fail("prepared data first"))
    monkeypatch.setattr(cli, "train", lambda *a, **k: pytest.fail("trained"))
    with pytest.raises(SystemExit) as exit_:
        cli.main(["--profile", "tiny", "--out", str(out), "--no-progress"])
    assert exit_.value.code == 2 and str(out) in capsys.readouterr().err


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupted_run_saves_its_step_and_says_how_to_resume(sig, finished, tmp_path):
    out = tmp_path / "run"
    for name in ("vocab.model", "data.pt", "data.json"):
        (out).mkdir(exist_ok=True)
        shutil.copy(finished / name, out / name)
    messages = []

    def log(msg):
        messages.append(msg)
        if msg.startswith("step 6:"):               # the dev evaluation of step 6: a signal arrives mid-run
            os.kill(os.getpid(), sig)
    summary = train(tiny(eval_every=6, save_every_steps=100), out, log=log, **QUIET)
    assert summary["steps"] == 6 and summary["stopped_by"] == signal.Signals(sig).name
    assert [p.name for p in checkpoint_paths(out)] == ["step_0000006.pt"]
    assert any("resume" in m and "python -m transformer.train" in m for m in messages)
    assert signal.getsignal(sig) in (signal.default_int_handler, signal.SIG_DFL)   # handlers given back
    resumed = train(tiny(eval_every=6, save_every_steps=100), out, log=messages.append, **QUIET)
    assert resumed["steps"] == 12 and resumed["stopped_by"] is None
    straight = checkpoint_weights(checkpoint_paths(finished)[-1])
    again = checkpoint_weights(checkpoint_paths(out)[-1])
    assert all(torch.equal(straight[k], again[k]) for k in straight)


# evaluate, deploy, translate: a bad request is answered before any translation


def test_evaluate_refuses_bad_requests_before_translating(run, monkeypatch, capsys, tmp_path):
    from transformer import evaluate
    monkeypatch.setattr(evaluate, "translate", lambda *a, **k: pytest.fail("translated first"))
    bad = [[str(run), "--hyps", str(tmp_path / "no" / "such" / "folder" / "hyps.txt")],
           [str(run), "--hyps", str(tmp_path)],
           [str(tmp_path / "missing")], [str(run), "--split", "bogus"], [str(run), "--beam", "0"],
           [str(run), "--average", "-1"], [str(run), "--average", "0"], [str(run), "--average", "4"]]
    if not torch.cuda.is_available():
        bad.append([str(run), "--device", "cuda"])
    for args in bad:
        with pytest.raises(SystemExit) as exit_:
            evaluate.main(args)
        err = capsys.readouterr().err
        assert exit_.value.code == 2 and "Traceback" not in err and "error:" in err, (args, err)


def test_a_damaged_checkpoint_is_named_by_evaluate_and_deploy(run, tmp_path, capsys):
    from transformer import deploy, evaluate, run as checkpoint
    damage(checkpoint_paths(run)[-1])
    with pytest.raises(CheckpointError, match="step_0000012.pt"):
        checkpoint.load_model(run)
    for main, args in ((evaluate.main, [str(run), "--split", "dev"]),
                       (deploy.main, [str(run), str(tmp_path / "ct2")])):
        with pytest.raises(SystemExit) as exit_:
            main(args)
        err = capsys.readouterr().err
        assert exit_.value.code == 2 and "step_0000012.pt" in err and len(err.splitlines()) <= 3, err


def test_averaging_counts_below_one_are_refused(run):
    from transformer.run import load_model
    for k in (0, -1):
        with pytest.raises(ValueError, match="at least 1"):
            load_model(run, average_last=k)


def test_api_and_command_line_load_the_same_checkpoints_by_default(run):
    from transformer.run import load_model
    _, _, used = load_model(run)
    assert used == [p.name for p in checkpoint_paths(run)[-json.loads((run / "profile.json").read_text())
                                                         ["average_last"]:]]


def test_deploy_refuses_a_folder_that_is_not_its_own(run, finished, tmp_path, capsys):
    pytest.importorskip("ctranslate2")
    from transformer import deploy
    before = snapshot(finished)
    for target in (finished, tmp_path / "notes"):
        if not target.exists():
            target.mkdir()
            (target / "notes.txt").write_text("mine")
        with pytest.raises(SystemExit) as exit_:
            deploy.main([str(run), str(target)])
        assert exit_.value.code == 2 and "not a CTranslate2 export" in capsys.readouterr().err
    assert snapshot(finished) == before
    out = tmp_path / "ct2"
    deploy.main([str(run), str(out)])
    deploy.main([str(run), str(out), "--average", "1"])          # its own export: replaced
    with pytest.raises(SystemExit):
        deploy.main([str(run), str(tmp_path / "x"), "--average", "0"])


def test_a_bare_string_is_translated_as_one_sentence(run):
    from transformer.run import load_model
    from transformer.decode import translate
    model, vocab, _ = load_model(run)
    one = translate(model, vocab, "Ein Hund läuft.", beam_size=1, progress=False)
    assert isinstance(one, str)
    assert one == translate(model, vocab, ["Ein Hund läuft."], beam_size=1, progress=False)[0]


def test_the_command_ends_with_a_summary_and_the_next_command(tmp_path, monkeypatch, capsys):
    from transformer import train as cli
    summary = dict(profile="tiny", steps=12, epochs=1.5, train_minutes=0.2, parameters=1, vocab=1000,
                   train_pairs=3000, checkpoints=["step_0000012.pt"], dev_ppl=31.4159, stopped_by=None)
    monkeypatch.setattr(cli, "train", lambda *a, **k: dict(summary))
    out = tmp_path / "my run"
    cli.main(["--profile", "tiny", "--out", str(out), "--no-progress"])
    err = capsys.readouterr().err
    assert "12 steps (1.5 epochs)" in err and "dev perplexity 31.42" in err
    assert f"next: python -m transformer.evaluate '{out}'" in err
    # stopped by a signal: the exit status says so, and the message says how to resume
    summary["stopped_by"] = "SIGTERM"
    with pytest.raises(SystemExit) as exit_:
        cli.main(["--profile", "tiny", "--out", str(out), "--no-progress", "--set", "max_steps=50"])
    assert exit_.value.code == 128 + signal.SIGTERM
    assert f"to resume, run: python -m transformer.train --profile tiny --out '{out}' --set max_steps=50" \
        in capsys.readouterr().err


# a run whose checkpoints are gone, --start-over, and the printed next command


@pytest.mark.parametrize("gone", ["emptied", "removed"])
def test_a_run_whose_checkpoints_are_gone_stops_and_keeps_its_logs(gone, run):
    """An unmounted checkpoint volume looks like this: the logs record steps, checkpoints/ is empty or
    missing. Training again from step 0 would rewrite the run's only remaining record."""
    for path in checkpoint_paths(run):
        path.unlink()
    if gone == "removed":
        (run / "checkpoints").rmdir()
    before = snapshot(run)
    with pytest.raises(CheckpointError, match=r"records 12 steps.*no checkpoint.*--start-over"):
        train(tiny(), run, log=lambda msg: None, **QUIET)
    assert snapshot(run) == before
    # starting over is a choice, and the old logs stay beside the new ones
    summary = train(tiny(), run, start_over=True, log=lambda msg: None, **QUIET)
    assert summary["steps"] == 12
    for log in ("train_log.csv", "dev_log.csv"):
        if Path(log) in before:
            assert (run / f"{log}.before-start-over").read_bytes() == before[Path(log)]
    assert Path("train_log.csv") in before


def test_start_over_on_a_run_that_can_resume_is_refused(run):
    before = snapshot(run)
    with pytest.raises(CheckpointError, match=r"can be read.*resumes from it"):
        train(tiny(), run, start_over=True, log=lambda msg: None, **QUIET)
    assert snapshot(run) == before


@pytest.mark.parametrize("setting", ["model.max_len=10", "seed=-1", "corpus=nope"])
def test_settings_that_fail_late_are_refused_before_a_folder_is_made(setting, tmp_path, capsys):
    from transformer.train import main
    with pytest.raises(SystemExit) as exit_:
        main(["--profile", "tiny", "--out", str(tmp_path / "run"), "--no-progress", "--set", setting])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "Traceback" not in err and setting.split("=")[0].split(".")[-1] in err
    assert not (tmp_path / "run").exists()


def test_a_vocabulary_too_large_for_the_corpus_is_one_line(tmp_path):
    need_corpus("multi30k", "train", "dev")
    with pytest.raises(ValueError, match=r"vocab_size 100000: .*Vocabulary size too high"):
        train(tiny(vocab_size=100_000), tmp_path / "run", log=lambda msg: None, **QUIET)


def test_no_corpus_and_no_network_is_one_line_and_leaves_no_folder(tmp_path, monkeypatch, capsys):
    from transformer import corpora, train as cli

    def offline(url, dest, desc=None):
        raise corpora.DownloadError(f"could not download {url} to {dest}: no network")
    monkeypatch.setattr(corpora, "download", offline)
    monkeypatch.setenv("TRANSFORMER_DATA", str(tmp_path / "empty"))
    with pytest.raises(SystemExit) as exit_:
        cli.main(["--profile", "tiny", "--out", str(tmp_path / "run"), "--no-progress"])
    assert "could not download" in str(exit_.value.code) and "Traceback" not in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_ctrl_c_during_data_preparation_says_how_to_go_on(tmp_path, monkeypatch, capsys):
    from transformer import run, train as cli

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt
    monkeypatch.setattr(run, "load_split", interrupted)
    with pytest.raises(SystemExit) as exit_:
        cli.main(["--profile", "tiny", "--out", str(tmp_path / "run"), "--no-progress"])
    err = capsys.readouterr().err
    assert exit_.value.code == 130 and "interrupted" in err and "python -m transformer.train" in err


def test_the_printed_next_command_works_on_a_short_run(run, capsys):
    """After --set max_steps=... a run may hold fewer checkpoints than its profile averages: the default
    averages those there are, and says so."""
    from transformer import evaluate
    for path in checkpoint_paths(run)[:-2]:
        path.unlink()
    messages = []
    from transformer.run import load_model
    _, _, used = load_model(run, log=messages.append)
    assert used == ["step_0000008.pt", "step_0000012.pt"] and "averaging those 2" in messages[0]
    evaluate.main([str(run), "--split", "dev", "--beam", "1"])
    assert "averaging 2 checkpoint(s)" in capsys.readouterr().err


def test_the_set_option_needs_a_value(capsys):
    from transformer.train import main
    with pytest.raises(SystemExit) as exit_:
        main(["--profile", "tiny", "--set"])
    assert exit_.value.code == 2
