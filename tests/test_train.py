"""The training loop: a killed run resumes exactly; two processes equal one; checkpoints; the command line."""
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from transformer.train import (PROFILES, checkpoint_paths, get_profile, load_latest_checkpoint, main,
                               parse_overrides, read_log)

ROOT = Path(__file__).resolve().parents[1]
TINY = ["--profile", "tiny", "--device", "cpu", "--no-progress"]


def run(args, out, extra=(), **kw):
    cmd = [sys.executable, "-m", "transformer.train", *TINY, "--out", str(out), "--set", *extra, *args]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)


def finish(proc):
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0, out
    return out


def weights(out):
    return torch.load(checkpoint_paths(out)[-1], weights_only=False)["model"]


@pytest.fixture(scope="module")
def straight(tmp_path_factory):
    """An uninterrupted 24-step tiny run; other runs reuse its prepared data (vocab.model, data.pt)."""
    out = tmp_path_factory.mktemp("straight")
    finish(run(["max_steps=24", "save_every_steps=4", "eval_every=1000"], out))
    return out


def with_data_of(src, dest):
    dest.mkdir(parents=True, exist_ok=True)
    for name in ("vocab.model", "data.pt"):
        shutil.copy(src / name, dest / name)
    return dest


def test_killed_run_resumes_to_identical_weights(straight, tmp_path):
    out = with_data_of(straight, tmp_path / "killed")
    proc = run(["max_steps=24", "save_every_steps=4", "eval_every=1000"], out)
    deadline = time.time() + 120
    while time.time() < deadline and not any(p.name >= "step_0000008.pt" for p in checkpoint_paths(out)):
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)          # no chance to clean up, as with a crash or a pre-emption
    proc.wait()
    killed_at = int(checkpoint_paths(out)[-1].stem.split("_")[1])
    assert 8 <= killed_at < 24, "the run must be killed in the middle"
    output = finish(run(["max_steps=24", "save_every_steps=4", "eval_every=1000"], out))
    assert f"resumed from" in output
    a, b = weights(straight), weights(out)
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert read_log(out / "train_log.csv")["step"].astype(int).tolist() == list(range(1, 25))
    assert not list((out / "checkpoints").glob("*.tmp"))


def test_two_processes_equal_one_with_the_same_global_batch(straight, tmp_path):
    args = ["max_steps=8", "save_every_steps=8", "eval_every=1000"]
    single = with_data_of(straight, tmp_path / "single")
    finish(run(args, single))                  # 1 process, 2 accumulated batches per step
    out = with_data_of(straight, tmp_path / "ddp")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", "29517",
           "-m", "transformer.train", *TINY, "--out", str(out), "--set", *args]
    res = subprocess.run(cmd, cwd=ROOT, env={**os.environ, "OMP_NUM_THREADS": "1"}, capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "on 2 × cpu; 1 batch(es)" in res.stdout + res.stderr    # 2 processes, 1 batch each per step
    one, two = weights(single), weights(out)
    for k, v in one.items():
        assert torch.allclose(v, two[k], rtol=1e-4, atol=1e-5), k
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
    assert path == newest and ckpt["step"] == 24 and "cannot read" in messages[0]


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
    with pytest.raises(ValueError, match="unknown profile field"):
        parse_overrides(["steps=5"], p)
    with pytest.raises(ValueError, match="key=value"):
        parse_overrides(["steps"], p)


def test_command_line_needs_a_profile_by_name(capsys):
    with pytest.raises(SystemExit):
        main([])
    assert "--profile" in capsys.readouterr().err
