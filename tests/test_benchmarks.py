"""The training-step benchmarks run (tiny shapes, CPU, one thread) and print what they promise.

benchmarks/train_step.py and benchmarks/gpu_step.py --smoke run in subprocesses with OMP_NUM_THREADS=1 on the
WMT news test sets; they need the offline corpora (../shared/data, or $TRANSFORMER_DATA). Without them the
tests skip, unless $CI is set, where they fail.
"""
import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.conftest import need_corpus

ROOT = Path(__file__).resolve().parents[1]


def data_root():
    """The corpus folder the benchmarks will read (the WMT news test sets); skips, or fails under CI, without them."""
    return need_corpus("wmt-news", "train")


def run_script(name, *args, timeout=300):
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", TRANSFORMER_DATA=str(data_root()))
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / name), *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{name} exited with {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def test_train_step_benchmark_tiny():
    out = run_script("train_step.py", "--preset", "tiny", "--vocab", "1000", "--rounds", "1", "--warmup", "1",
                     "--batches", "2", "--max-tokens", "400", "--bpe-pairs", "2000", "--threads", "1")
    assert "1 threads" in out and "preset tiny" in out and "vocabulary 1000" in out
    ours, ref = re.search(r"parameters: ours ([\d,]+), reference ([\d,]+)", out).groups()
    assert ours == ref, "the reference must have exactly our parameters"
    for variant in ("ours", "reference"):
        row = re.search(rf"^{variant} +([\d.]+) +(\d+) +(\d+) +([\d.]+)x +(\d+)-(\d+)$", out, re.M)
        assert row, f"no row for {variant}:\n{out}"
        assert float(row.group(1)) > 0 and int(row.group(2)) > 0
    assert re.search(r"^ours/reference: \d+\.\d\dx", out, re.M)


def test_gpu_step_smoke_on_cpu(tmp_path):
    out = run_script("gpu_step.py", "--smoke", "--profile-top", "5", "--json", str(tmp_path / "bench_compiled_base.json"))
    assert out.startswith("device: CPU")
    assert "precision: fp32" in out and "torch.compile: eager" in out
    assert re.search(r"joint BPE of 1000 pieces", out)
    assert re.search(r"measured CPU matmul rate: [\d.]+ TFLOP/s", out)
    assert re.search(r"model FLOPs per step \(analytic, non-pad tokens\): [\d.]+ TFLOP", out)
    for variant in ("ours", "reference"):
        assert re.search(rf"^CPU {variant}: target tokens/s \d+; MFU [\d.]+%; projected 100000 steps: [\d.]+ h",
                         out, re.M), out
        assert re.search(rf"^{variant} .* n/a \(CPU\)", out, re.M), out
    assert re.search(r"^CPU ours/reference: \d+\.\d\dx", out, re.M)
    assert "CPU process peak resident memory" in out
    # a compiled step: batches in shape classes, graphs counted, the costliest operations listed
    assert re.search(r"shape classes: pad_to 8, \d+ distinct micro-batch shapes", out), out
    assert re.search(r"^CPU ours: graphs compiled during the warm-up [1-9]\d*, during the timed steps 0;", out, re.M), out
    assert "CPU ours: the costliest operations over 3 steps" in out and "aten::mm" in out
    # the GPU script's record, from this output and two training logs
    for name, losses in (("eager", [9.0, 8.5, 8.1]), ("compiled", [9.0, 8.6])):
        rows = "".join(f"{i + 1},{loss},{1000 + i}\n" for i, loss in enumerate(losses))
        (tmp_path / f"train_{name}_log.csv").write_text("step,loss,tokens_per_s\n" + rows)
    steps = ["bench_eager: exit 124 after 110 s (limit 110 s): x", "bench_compiled_base: exit 0 after 9 s (limit 215 s): y"]
    (tmp_path / "env.txt").write_text("2026-01-01T00:00:00Z\nNVIDIA H200, 143771 MiB, 580.1\n16\n" + "\n".join(steps) + "\n")
    record_script = [sys.executable, str(ROOT / "scripts" / "gpu_compile_record.py"), str(tmp_path)]
    subprocess.run(record_script, check=True)
    record = json.loads((tmp_path / "record.json").read_text())
    assert record["missing"] == ["bench_eager.json: the step was cut off or failed (see steps)"]
    assert record["steps"] == steps and record["later_calls"] == {}
    assert record["hardware"] == {"gpu": "NVIDIA H200", "gpu_memory_mib": 143771, "driver": "580.1", "cpu_count": 16}
    tiny = record["benchmarks"]["bench_compiled_base"]["presets"]["tiny"]
    assert tiny["pad_to"] == 8 and tiny["ours"]["graphs_timed"] == 0 and tiny["ours"]["tps"] > 0
    assert record["training"]["loss_at_common_steps"] == [[1, 9.0, 9.0], [2, 8.5, 8.6]]
    assert abs(record["training"]["max_loss_difference"] - 0.1) < 1e-9
    # a benchmark from a call of its own is kept apart, and never divided by one from the script's call
    (tmp_path / "bench_again.json").write_text((tmp_path / "bench_compiled_base.json").read_text())
    (tmp_path / "bench_again.log").write_text("output\n")
    refused = subprocess.run(record_script, capture_output=True, text=True)
    assert refused.returncode == 1 and "must end with its step line" in refused.stderr
    (tmp_path / "bench_again.log").write_text("output\nbench_again: exit 0 after 9 s (limit 300 s): z\n")
    subprocess.run(record_script, check=True)
    record = json.loads((tmp_path / "record.json").read_text())
    assert record["later_calls"]["bench_again"]["step"].startswith("bench_again: exit 0")
    printed = out.split("\nwrote ")[0].lower()       # the last line names the JSON file, under pytest's folder
    assert "cuda" not in printed and "gpu" not in printed


def load_gpu_step():
    spec = importlib.util.spec_from_file_location("gpu_step", ROOT / "benchmarks" / "gpu_step.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("which", ["ours", "reference"])
def test_model_flops_match_the_flop_counter(which):
    """The analytic MFU numerator equals what FlopCounterMode counts for forward + backward of an unpadded batch."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.utils.flop_counter import FlopCounterMode
    from transformer import Transformer, TransformerConfig

    gpu_step = load_gpu_step()
    cfg, V, B, S, T = TransformerConfig.preset("tiny", P_drop=0.0), 50, 3, 7, 5
    model = Transformer(cfg, V) if which == "ours" else gpu_step.TorchReference(cfg, V)
    src, tgt_in = torch.randint(4, V, (B, S)), torch.randint(4, V, (B, T))
    # the math backend runs attention as batched matmuls, which the counter sees on the CPU
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        model(src, tgt_in).sum().backward()
    assert counter.get_total_flops() == gpu_step.model_flops(cfg, V, [S] * B, [T] * B)


def test_decode_speed_benchmark_compares_every_engine_on_one_run(tmp_path):
    """benchmarks/decode_speed.py on an untrained run: every engine and search gets a row, and the
    readable decoders give the package's outputs exactly."""
    from dataclasses import asdict

    from transformer import Transformer, TransformerConfig
    from transformer.run import save_checkpoint
    from transformer.corpora import load_split
    from transformer.data import train_vocab
    root = need_corpus("multi30k", "train", "test")
    vocab = train_vocab(load_split("multi30k", "train", root)[:500], vocab_size=400)
    cfg = TransformerConfig(N=1, d_model=16, d_ff=32, h=2, max_len=128)
    run = tmp_path / "run"
    save_checkpoint(run, 1, {"model": Transformer(cfg, len(vocab)).state_dict(), "model_config": asdict(cfg),
                             "vocab": vocab.proto}, keep=1)
    env = dict(os.environ, OMP_NUM_THREADS="1", TRANSFORMER_DATA=str(root))
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "decode_speed.py"), "--run", str(run),
                           "--threads", "1", "--sentences", "12", "--rounds", "1", "--profile",
                           "--out", str(tmp_path / "speed.json")],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    import json
    record = json.loads((tmp_path / "speed.json").read_text())
    rows = {(r["search"], r["engine"]): r for r in record["rows"]}
    engines = ["readable + cat", "readable", "package", "package, full ranking", "ctranslate2 fp32",
               "ctranslate2 int8"]
    assert set(rows) == {(s, e) for s in ("greedy", "beam 4") for e in engines}
    for search in ("greedy", "beam 4"):
        for engine in ("readable + cat", "readable", "package", "package, full ranking"):
            assert rows[search, engine]["equal_to_package"] == 12
        assert rows[search, "package"]["package_speedup"] == 1.0
        # the within-round ratios: the package's own are 1, every engine's lie around their median
        assert rows[search, "package"]["paired_speedup_range"] == [1.0, 1.0]
        assert all(r["paired_speedup_range"][0] <= r["paired_speedup"] <= r["paired_speedup_range"][1]
                   and len(r["round_seconds"]) == 1 for r in record["rows"])
        assert all(r["sentences_per_s"] > 0 and r["target_tokens_per_s"] > 0 for r in record["rows"])
    # (an untrained model runs to the limit, which in a batch is looser for the engine: test_deploy compares)
    assert 0 <= rows["greedy", "ctranslate2 fp32"]["equal_to_package"] <= 12
    assert record["sentences"] == 12 and record["threads"] == 1 and record["commit"] and record["hardware"]["cpu"]
    for engine in engines:
        assert re.search(rf"^beam 4 +{re.escape(engine)} +[\d.]+ +\d+ +[\d.]+ ", proc.stdout, re.M), proc.stdout
    # the beam's time by part of the search: the parts outside the decoder layers never overlap (none is
    # called inside another), so what they leave of the pass, the rest, is not negative
    by_part = record["profile"]["by_part"]
    parts = {p["part"]: p for p in by_part["parts"]}
    assert {"encoder", "decoder layers", "attention kernel", "cache following the beam", "the rest"} <= set(parts)
    assert all(p["seconds"] >= 0 for p in parts.values())
    assert 0 <= parts["the rest"]["seconds"] < by_part["wall_seconds"]
    assert parts["attention kernel"]["seconds"] <= parts["attention sublayers"]["seconds"] <= parts["decoder layers"]["seconds"]
    assert parts["decoder layers"]["calls"] == parts["projection onto the vocabulary"]["calls"] > 0


def test_the_readme_quotes_the_cpu_precision_records():
    """README and chapter 5.2 say bfloat16 was slower than float32 on a CPU that has its instructions: the
    figures quoted must be those of the records in results/cpu-precision/."""
    import json
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    records = {p.stem: json.loads(p.read_text()) for p in (ROOT / "results" / "cpu-precision").glob("*.json")}
    intel, amd = records["intel-xeon-amx"], records["amd-epyc-avx2"]
    f32, kept, bf16 = (r["tokens_per_s"] for r in intel["rows"])
    assert f"float32 {f32} tokens/s, freed memory kept {kept} (x{kept / f32:.2f}), kept memory with " \
           f"bfloat16 {bf16} (x{bf16 / f32:.2f})" in readme
    assert bf16 < kept and intel["cpu_bf16_instructions"] and not amd["cpu_bf16_instructions"]
    a32, akept = (r["tokens_per_s"] for r in amd["rows"])
    assert f"(float32 {a32}, kept memory {akept}, x{akept / a32:.2f})" in readme
