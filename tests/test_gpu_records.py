"""The README's GPU status quotes the GPU records; these tests keep the quotes true, and the GPU check
scripts fit the device time they are given.

Chapter 5.2 reads the same records and asserts its own sentences; the README cannot run code, so
its numbers are checked here against the logs they came from.
"""
import json
import re
import subprocess
from pathlib import Path

import numpy as np

from transformer.profiles import get_profile
from transformer.run import read_log
from transformer.runlog import read_evaluation

ROOT = Path(__file__).resolve().parent.parent
SCHED = ROOT / "results" / "gpu-schedule"
README = (ROOT / "README.md").read_text(encoding="utf-8")


def run(name):
    record = json.loads((SCHED / "record.json").read_text())
    return next(r for r in record["runs"] if r["name"] == name)


def test_the_pipeline_profile_peaks_where_the_measured_schedule_did():
    news = get_profile("wmt-news-base")
    assert f"--set lr_factor={news.lr_factor}" in run("f0316")["command"]
    assert news.warmup_steps == 400 and f"`lr_factor={news.lr_factor}`" in README


def test_the_readme_quotes_the_schedule_check_dev_losses():
    quoted = re.search(r"dev ([\d.]+) and\s+([\d.]+) nats per piece at step 1000", README)
    assert quoted, "the README no longer quotes the schedule check"
    for value, name in zip(quoted.groups(), ("f0316", "w4000")):
        dev = read_log(SCHED / run(name)["dev_log"])
        assert dev["step"][-1] == 1000 and f"{dev['dev_nll'][-1]:.2f}" == value


def test_the_readme_bounds_the_schedule_check_bleu():
    assert "dev BLEU below 2 for every schedule" in " ".join(README.split())
    for name in ("w4000", "f0316", "f05"):
        assert read_evaluation(SCHED / run(name)["evaluate_log"])["sacrebleu"] < 2


def test_the_readme_quotes_the_compiled_step_times():
    quoted = re.search(r"\((\d+), (\d+) and (\d+) s\)", README)
    log = read_log(SCHED / run("compiled, the paper's schedule")["train_log"])
    seconds = np.diff(log["elapsed_s"], prepend=0)
    assert quoted and [f"{s:.0f}" for s in seconds] == list(quoted.groups())


def test_the_compile_check_fits_one_device_call_of_nine_minutes():
    """scripts/gpu_compile.sh: every step bounded, the limits adding up to at most 9 minutes (540 s)."""
    script = ROOT / "scripts" / "gpu_compile.sh"
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
    text = script.read_text()
    fixed = [int(s) for s in re.findall(r"^(?:step \S+|train \S+) (\d+)\b", text, re.M)]
    assert len(fixed) == 3, fixed           # two benchmarks and the eager run
    total = int(re.search(r"left=\$\(\( (\d+) - \(SECONDS - start\) \)\)", text).group(1))
    assert sum(fixed) + 60 <= total <= 540  # the compiled run gets what is left, at least a minute


def test_the_readme_quotes_the_compile_check():
    """The README's figures of the compile check are the record's, rounded as quoted."""
    record = json.loads((ROOT / "results" / "gpu-compile" / "record.json").read_text())
    base, train = record["base_compiled"], record["training"]
    later = record["later_calls"][base["from"]]
    seconds = int(re.search(r"exit 0 after (\d+) s", later["step"])[1])
    text = " ".join(README.split())
    for quote in (f"over {later['presets']['base']['distinct_shapes']} batch shapes",
                  f"{base['tokens_per_s']:,.0f} target tokens/s, MFU {base['mfu']:.1%}",
                  f"projecting {base['projected_base_schedule_hours']:.1f} h",
                  f"a call of its own ({seconds} s",
                  f"ran {train['compiled_speedup']:.2f} times as fast as eager",
                  f"in its first step only ({train['compiled']['first_step_s']:.0f} s)",
                  f"within {train['max_loss_difference']:.3f} nats",
                  f"kernels at {base['gpu_time']['gpu_busy_fraction']:.0%} of a compiled step"):
        assert quote in text, quote
    assert not base["recompiled_while_timed"] and not base["mfu_goal_met"]
