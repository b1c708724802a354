"""The training loop: a killed run resumes exactly; two processes equal one; checkpoints; the command line."""
import copy
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.conftest import need_corpus
from transformer.checkpoint import checkpoint_weights
from transformer.profiles import PROFILES, get_profile, parse_overrides
from transformer.run import checkpoint_paths, load_latest_checkpoint, read_log
from transformer.train import main

ROOT = Path(__file__).resolve().parents[1]
TINY = ["--profile", "tiny", "--device", "cpu", "--no-progress"]


def run(args, out, extra=(), script=("-m", "transformer.train"), env=None, **kw):
    cmd = [sys.executable, *script, *TINY, "--out", str(out), "--set", *extra, *args]
    env = {**os.environ, "OMP_NUM_THREADS": "1", **(env or {})}
    return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)


def torchrun(nproc, out, args, script=("-m", "transformer.train")):
    """Run the trainer in `nproc` gloo processes (a free port: --standalone); return its output."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(nproc),
           *script, *TINY, "--out", str(out), "--set", *args]
    res = subprocess.run(cmd, cwd=ROOT, env={**os.environ, "OMP_NUM_THREADS": "1"}, capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    return res.stdout + res.stderr


def finish(proc):
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0, out
    return out


def weights(out):
    return checkpoint_weights(checkpoint_paths(out)[-1])


@pytest.fixture(scope="module")
def straight(tmp_path_factory):
    """An uninterrupted 24-step tiny run; other runs reuse its prepared data (vocab.model, data.pt)."""
    need_corpus("multi30k", "train", "dev")
    out = tmp_path_factory.mktemp("straight")
    finish(run(["max_steps=24", "save_every_steps=4", "eval_every=1000"], out))
    return out


def with_data_of(src, dest):
    dest.mkdir(parents=True, exist_ok=True)
    for name in ("vocab.model", "data.pt", "data.json"):
        shutil.copy(src / name, dest / name)
    return dest


def test_killed_run_resumes_to_identical_weights(straight, tmp_path):
    out = with_data_of(straight, tmp_path / "killed")
    # killed while starting step 15: steps 13 and 14 are done and maybe logged, but the newest checkpoint is 12
    proc = run(["max_steps=24", "save_every_steps=4", "eval_every=1000"], out,
               script=(str(ROOT / "tests" / "kill_at.py"),), env={"KILL_AT_STEP": "15"})
    output, _ = proc.communicate(timeout=300)
    assert proc.returncode == -signal.SIGKILL and "killing myself at step 15" in output, output
    assert checkpoint_paths(out)[-1].name == "step_0000012.pt"
    assert read_log(out / "train_log.csv")["step"].astype(int).tolist()[-1] == 13   # a row the resume must drop
    output = finish(run(["max_steps=24", "save_every_steps=4", "eval_every=1000"], out))
    assert f"resumed from" in output
    a, b = weights(straight), weights(out)
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert read_log(out / "train_log.csv")["step"].astype(int).tolist() == list(range(1, 25))
    assert not list((out / "checkpoints").glob("*.tmp"))


def without_key_biases(state):
    """The weights, less the key third of each attention's input bias. Its gradient is zero in exact
    arithmetic (softmax ignores a constant added to all of a query's scores), so what Adam, which
    divides by the gradient's size, makes of it is rounding noise, different for every split of a step."""
    out = dict(state)
    for k, v in state.items():
        if k.endswith("in_proj.bias"):
            out[k] = torch.cat([v[:v.numel() // 3], v[2 * v.numel() // 3:]])
    return out


NO_DROPOUT = ["model.P_drop=0.0", "eval_every=1000"]


def assert_same_weights(a, b):
    a, b = without_key_biases(a), without_key_biases(b)
    for k in a:
        assert torch.allclose(a[k], b[k], rtol=1e-4, atol=1e-5), (k, (a[k] - b[k]).abs().max().item())



def test_two_processes_equal_one_with_the_same_global_batch(straight, tmp_path):
    args = ["max_steps=8", "save_every_steps=8", *NO_DROPOUT]
    single = with_data_of(straight, tmp_path / "single")
    finish(run(args, single))                  # 1 process, 2 accumulated batches per step
    out = with_data_of(straight, tmp_path / "ddp")
    res = torchrun(2, out, args)
    assert "on 2 × cpu; steps of ≤2048 tokens in micro-batches of ≤1024 (about 1 per device)" in res
    assert_same_weights(weights(single), weights(out))
    log1, log2 = read_log(single / "train_log.csv"), read_log(out / "train_log.csv")
    assert torch.allclose(torch.tensor(log1["loss"]), torch.tensor(log2["loss"]), rtol=1e-4)
    assert log1["tgt_tokens"].tolist() == log2["tgt_tokens"].tolist()


def test_a_damaged_newest_checkpoint_falls_back_to_the_one_before(straight, tmp_path):
    out = tmp_path / "damaged"
    shutil.copytree(straight / "checkpoints", out / "checkpoints")
    newest = checkpoint_paths(out)[-1]
    (out / "checkpoints" / "step_9999999.pt").write_bytes(b"not a checkpoint")
    messages = []
    ckpt, path = load_latest_checkpoint(out, messages.append)
    assert path == newest and ckpt["step"] == 24 and "cannot be read" in messages[0]


def test_only_the_last_checkpoints_are_kept(straight):
    names = [p.name for p in checkpoint_paths(straight)]
    keep = max(PROFILES["tiny"].keep_last, PROFILES["tiny"].average_last)
    assert names == [f"step_{s:07d}.pt" for s in range(24 - 4 * (keep - 1), 25, 4)]


def test_profiles_and_overrides():
    assert PROFILES["wmt14-base"].max_steps == 100_000 and PROFILES["wmt14-base"].average_last == 5
    assert PROFILES["wmt14-big"].max_steps == 300_000 and PROFILES["wmt14-big"].average_last == 20
    with pytest.raises(ValueError, match="unknown profile"):
        get_profile("wmt15")
    p = get_profile("tiny")
    assert parse_overrides(["max_steps=5", "model.P_drop=0.3", "max_minutes=None"], p) == \
        {"max_steps": 5, "model": {"P_drop": 0.3}, "max_minutes": None}
    with pytest.raises(ValueError, match="unknown field"):
        parse_overrides(["steps=5"], p)
    with pytest.raises(ValueError, match="key=value"):
        parse_overrides(["steps"], p)


def test_command_line_needs_a_profile_by_name(capsys):
    with pytest.raises(SystemExit):
        main([])
    assert "--profile" in capsys.readouterr().err



@pytest.mark.parametrize("first, then", [(2, 1), (1, 2)])
def test_a_run_resumes_on_another_number_of_processes_with_the_same_data(straight, tmp_path, first, then):
    """Stop after 6 steps on `first` processes, continue to 12 on `then`: the same sentences in every step,
    and (without dropout, whose masks follow the micro-batch split) the weights of an uninterrupted run."""
    reference = with_data_of(straight, tmp_path / "reference")
    finish(run(["max_steps=12", "save_every_steps=6", *NO_DROPOUT], reference))
    out = with_data_of(straight, tmp_path / "switched")
    for nproc, steps in ((first, 6), (then, 12)):
        args = [f"max_steps={steps}", "save_every_steps=6", *NO_DROPOUT]
        torchrun(nproc, out, args) if nproc > 1 else finish(run(args, out))
    log_ref, log = read_log(reference / "train_log.csv"), read_log(out / "train_log.csv")
    assert log["step"].astype(int).tolist() == list(range(1, 13))
    assert log["tgt_tokens"].tolist() == log_ref["tgt_tokens"].tolist()   # the same batches, step by step
    assert log["src_tokens"].tolist() == log_ref["src_tokens"].tolist()
    assert_same_weights(weights(reference), weights(out))


def test_slow_data_preparation_does_not_time_out_the_process_group(tmp_path):
    """Rank 0 prepares the data for longer than the process group's timeout (3 s); the others must wait
    outside any collective, so the run still succeeds."""
    need_corpus("multi30k", "train", "dev")
    out = tmp_path / "slow"
    output = torchrun(2, out, ["max_steps=2", "save_every_steps=2", "eval_every=1000"],
                      script=(str(ROOT / "tests" / "slow_prepare.py"),))
    assert "slow preparation: 6 s, process group timeout 3 s" in output
    assert len(read_log(out / "train_log.csv")["step"]) == 2


def test_an_existing_run_refuses_settings_that_change_its_data_or_model(straight, tmp_path):
    out = with_data_of(straight, tmp_path / "refuse")
    finish(run(["max_steps=2", "save_every_steps=2"], out))
    for change, reason in (("vocab_size=500", "vocab_size: 1000 -> 500"), ("model.N=3", "N: 2 -> 3")):
        proc = run(["max_steps=4", change], out)
        output, _ = proc.communicate(timeout=300)
        assert proc.returncode != 0 and reason in output and "new --out folder" in output, output


def test_the_loop_gives_the_step_the_paper_s_loss_settings(straight, tmp_path, monkeypatch):
    """What train() hands to each step: the padding id, the profile's eps_ls and the step's token count;
    its log's loss is then the hand-computed smoothed loss per target token of the step."""
    import transformer.train as trainer
    from tests.test_absolute import smoothed_loss_by_hand

    seen, run_step = [], trainer.train_step

    def spy(net, optimizer, scheduler, batches, n_tgt, eps_ls, pad_id, *args, **kwargs):
        twin = copy.deepcopy(net).eval()          # the weights before this step; no dropout (P_drop=0 below)
        hand = [smoothed_loss_by_hand(twin(s, ti), to, 0.1, pad=0) for s, ti, to in batches]
        seen.append(dict(n_tgt=n_tgt, eps_ls=eps_ls, pad_id=pad_id, hand_loss=sum(h[0] for h in hand).item(),
                         hand_tokens=sum(h[2] for h in hand)))
        return run_step(net, optimizer, scheduler, batches, n_tgt, eps_ls, pad_id, *args, **kwargs)

    monkeypatch.setattr(trainer, "train_step", spy)
    out = with_data_of(straight, tmp_path / "spied")
    profile = get_profile("tiny", max_steps=2, save_every_steps=2, eval_every=1000, model={"P_drop": 0.0})
    trainer.train(profile, out, progress=False, device="cpu", log=lambda msg: None)
    log = read_log(out / "train_log.csv")
    assert len(seen) == 2
    for row, step in zip(seen, range(2)):
        assert (row["pad_id"], row["eps_ls"]) == (0, 0.1)
        assert row["n_tgt"] == row["hand_tokens"] == int(log["tgt_tokens"][step])
        assert float(log["loss"][step]) == pytest.approx(row["hand_loss"] / row["hand_tokens"], rel=1e-5)


def test_every_profile_of_the_book_is_named_in_one_table_and_runs_by_name(capsys):
    """The paper's, the CPU runs', the Table 3 sweep's, the parser's and the zh-en run's."""
    from transformer.model import PRESETS
    assert {"wmt14-base", "wmt14-big", "multi30k-cpu", "tiny", "table3-cpu", "ptb-parse",
            "ptb-parse-shared", "zh-en"} <= set(PROFILES)
    # the paper's runs are as long as their preset's train_steps (Table 3's column)
    assert PROFILES["wmt14-base"].max_steps == PRESETS["base"]["train_steps"]
    assert PROFILES["wmt14-big"].max_steps == PRESETS["big"]["train_steps"]
    assert get_profile("tiny", max_steps=None).max_steps == PRESETS["tiny"]["train_steps"]
    assert PROFILES["ptb-parse-shared"].model["share_embeddings"] and \
        not PROFILES["ptb-parse"].model["share_embeddings"]
    with pytest.raises(SystemExit):
        main(["--help"])
    listed = capsys.readouterr().out
    assert all(f"  {name} " in listed for name in PROFILES)


def test_a_results_record_carries_its_provenance_and_is_written_whole(tmp_path, monkeypatch):
    from transformer import runlog
    monkeypatch.setattr(runlog, "PATCH_AT_START", "")         # as from committed code
    path = tmp_path / "results" / "r.json"
    record = runlog.write_record(path, {"bleu": 1.5}, command="python scripts/x.py --y")
    on_disk = json.loads(path.read_text())
    assert on_disk == record and on_disk["bleu"] == 1.5
    assert on_disk["command"] == "python scripts/x.py --y" and on_disk["hardware"]["cores"] >= 1
    assert {"date", "commit"} <= set(on_disk)
    # a failure while writing leaves the previous record whole
    monkeypatch.setattr(runlog, "provenance", lambda command=None: {"bad": object()})
    with pytest.raises(TypeError):
        runlog.write_record(path, {"bleu": 2.0})
    assert json.loads(path.read_text()) == on_disk and list(path.parent.iterdir()) == [path]


def test_a_record_lists_the_code_that_differs_from_its_commit(tmp_path):
    """A commit names the code a record came from only when the code was committed: uncommitted_changes lists
    the code files that differ (changed, added or new), and ignores what is not code (records, notebooks'
    outputs)."""
    import subprocess
    from transformer import runlog
    assert runlog.uncommitted_changes(tmp_path) is None          # not a git checkout
    git = lambda *args: subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)
    git("init", "-q")
    (tmp_path / "transformer").mkdir()
    (tmp_path / "transformer" / "model.py").write_text("x = 1\n")
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "r.json").write_text("{}\n")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "one")
    assert runlog.uncommitted_changes(tmp_path) == []
    (tmp_path / "transformer" / "model.py").write_text("x = 2\n")
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "new.py").write_text("print(1)\n")
    (tmp_path / "results" / "r.json").write_text('{"bleu": 1}\n')       # a record being written: not code
    assert runlog.uncommitted_changes(tmp_path) == ["scripts/new.py", "transformer/model.py"]
    # this repository's records and run starts carry the list
    assert "uncommitted" in runlog.provenance()


def test_a_record_names_the_code_its_process_started_from(monkeypatch):
    """A run of hours may end after other commits: its record names the code it started from, and the
    code checked out when it was written only where that differs."""
    from transformer import runlog
    now = runlog.code_state()
    monkeypatch.setattr(runlog, "CODE_AT_START", now)
    record = runlog.provenance("cmd")
    assert (record["commit"], record["uncommitted"]) == (now["commit"], now["uncommitted"])
    assert "code_when_written" not in record
    monkeypatch.setattr(runlog, "CODE_AT_START", {"commit": "0" * 40, "uncommitted": []})
    record = runlog.provenance("cmd")
    assert record["commit"] == "0" * 40 and record["code_when_written"] == now


def test_a_patch_of_the_uncommitted_code_rebuilds_it_from_its_commit(tmp_path):
    """code_patch holds what the commit lacks (a changed file and a new one, not a record): applied to a
    clean checkout of the commit it gives the code that ran."""
    import subprocess
    from transformer import runlog
    git = lambda *args, cwd=tmp_path: subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)
    git("init", "-q")
    (tmp_path / "transformer").mkdir()
    (tmp_path / "transformer" / "model.py").write_text("x = 1\n")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "one")
    (tmp_path / "transformer" / "model.py").write_text("x = 2\n")
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "new.py").write_text("print(1)\n")
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "r.json").write_text("{}\n")
    patch = runlog.code_patch(tmp_path)
    assert "results/r.json" not in patch
    clean = tmp_path.parent / (tmp_path.name + "-clean")
    git("clone", "-q", str(tmp_path), str(clean), cwd=tmp_path.parent)
    (clean / "code.patch").write_text(patch)
    git("apply", "code.patch", cwd=clean)
    assert (clean / "transformer" / "model.py").read_text() == "x = 2\n"
    assert (clean / "scripts" / "new.py").read_text() == "print(1)\n"


def test_a_record_among_the_books_is_refused_from_uncommitted_code_unless_allowed(tmp_path, monkeypatch):
    """A run that would write into results/ stops before any work while code differs from its commit;
    allowed, its record names the patch stored beside it. Records elsewhere (a reader's own) are free."""
    from transformer import runlog
    monkeypatch.setattr(runlog, "CODE_AT_START", {"commit": "a" * 40, "uncommitted": ["scripts/x.py"]})
    with pytest.raises(SystemExit, match=r"scripts/x\.py differ from commit aaaaaaaaaa.*--uncommitted"):
        runlog.refuse_uncommitted(runlog.RESULTS / "parsing")
    runlog.refuse_uncommitted(runlog.RESULTS / "parsing", allowed=True)
    runlog.refuse_uncommitted(tmp_path / "results")
    monkeypatch.setattr(runlog, "PATCH_AT_START", "diff --git a/scripts/x.py b/scripts/x.py\n")
    record = runlog.write_record(tmp_path / "results.json", {"f1": 1.0})
    assert record["patch"] == "results.patch" and record["uncommitted"] == ["scripts/x.py"]
    assert (tmp_path / "results.patch").read_text() == runlog.PATCH_AT_START


RECORDING_SCRIPTS = [("scripts/parsing.py", []), ("scripts/parsing_baselines.py", []),
                     ("scripts/silver_treebank.py", ["--treebank", "large"]), ("scripts/zh_en.py", ["--fit"]),
                     ("scripts/multi30k_cpu.py", []), ("scripts/vision.py", []),
                     ("transformer/variations.py", ["base"])]


@pytest.mark.parametrize("script, args", RECORDING_SCRIPTS, ids=[s for s, _ in RECORDING_SCRIPTS])
def test_every_recording_script_refuses_uncommitted_code_before_its_work(script, args, monkeypatch):
    """Each command that writes a record the book reads stops at once, naming the files, when started from
    code that differs from its commit; nothing is written."""
    import runpy
    import sys
    from transformer import runlog
    root = runlog.REPOSITORY
    monkeypatch.setattr(runlog, "CODE_AT_START", {"commit": "a" * 40, "uncommitted": ["scripts/x.py"]})
    before = sorted(p for p in (root / "results").rglob("*"))
    monkeypatch.setattr(sys, "argv", [str(root / script), *args])
    with pytest.raises(SystemExit, match="--uncommitted"):
        runpy.run_path(str(root / script), run_name="__main__")
    assert sorted(p for p in (root / "results").rglob("*")) == before


def test_the_machines_of_a_run_resumed_elsewhere_are_all_named(tmp_path):
    """A run trained partly on one machine and partly on another: machines_of gives each once, in the order
    first used, with its starts, while record_run_info keeps adding this machine's starts."""
    from transformer import runlog
    from transformer.distributed import Runtime
    from transformer.machine import hardware
    gpu = {**hardware(), "cpu": "Another CPU", "gpu": "Some GPU"}
    starts = [{"started": f"2026-01-0{day} 10:00:00 UTC", "device": device, "hardware": hw}
              for day, (device, hw) in enumerate([("cpu", hardware()), ("cuda:0", gpu), ("cuda:0", gpu)], 1)]
    (tmp_path / "run_info.json").write_text(json.dumps(starts))
    runlog.record_run_info(tmp_path, Runtime())
    machines = runlog.machines_of(tmp_path)
    assert [(m["device"], m["hardware"]["gpu"], m["starts"]) for m in machines] == [("cpu", None, 2),
                                                                                     ("cuda:0", "Some GPU", 2)]
    assert machines[1]["first"] == "2026-01-02 10:00:00 UTC" and machines[1]["last"] == "2026-01-03 10:00:00 UTC"
    assert machines[0]["first"] == "2026-01-01 10:00:00 UTC" and machines[0]["last"] > machines[1]["last"]


@pytest.mark.slow
def test_a_compiled_run_compiles_in_its_first_step_and_never_again(straight, tmp_path, monkeypatch):
    """The trainer's --compile on CPU inductor, batches in shape classes: every graph is compiled while the first
    step runs, none after, over steps of several shapes. Without duck sizing turned off, a first batch whose rows
    equal its length (32 x 32) compiled again at step 2. A GPU's compiler adds guards that the CPU's does not
    (a length's divisibility by 8, a size threshold): scripts/gpu_compile.sh counts those on a GPU."""
    from transformer import train
    out = with_data_of(straight, tmp_path / "compiled")
    graphs, shapes, real_step = [], [], train.train_step

    def counting_step(net, optimizer, scheduler, batches, *args, **kwargs):
        result = real_step(net, optimizer, scheduler, batches, *args, **kwargs)
        graphs.append(torch._dynamo.utils.counters["stats"]["unique_graphs"])
        shapes.extend(tuple(b[0].shape) for b in batches)
        return result

    monkeypatch.setattr(train, "train_step", counting_step)
    torch._dynamo.reset()
    before = torch._dynamo.utils.counters["stats"]["unique_graphs"]
    try:
        main([*TINY, "--out", str(out), "--compile", "--set", "max_steps=6", "eval_every=1000",
              "save_every_steps=1000", "model.N=1"])
    finally:
        torch._dynamo.reset()
    assert len(graphs) == 6 and len(set(shapes)) >= 3, (graphs, shapes)
    assert graphs[0] > before and graphs[1:] == [graphs[0]] * 5, f"compiled again after step 1: {graphs}"
    assert all(rows % 8 == 0 and length % 8 == 0 for rows, length in shapes), shapes
