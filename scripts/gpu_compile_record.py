"""record.json for scripts/gpu_compile.sh: what its steps measured, read from the files it left.

    python scripts/gpu_compile_record.py OUT_DIR

Reads env.txt (date, GPU, versions, commit, how each step ended), the benchmark's JSON files and the two
training logs, and writes OUT_DIR/record.json. A step that was cut off or failed leaves no JSON, and the
record says so rather than guessing: every number in it was measured by the step it names.

A benchmark run later, by hand, in a call of its own (say, a step the script cut off, given a longer limit)
may be added as OUT_DIR/bench_NAME.json with its output in bench_NAME.log, whose last line is its step line
in env.txt's form ("NAME: exit 0 after 203 s (limit 212 s): COMMAND"). The record keeps it apart: a figure
from another call ran on another machine start, and is never divided by one from the script's call.
"""
import csv
import json
import re
import statistics
import sys
from pathlib import Path

# the paper's base schedule, and the goal for the compiled base step's model FLOPs utilisation
BASE_STEPS, MFU_GOAL = 100_000, 0.35
NOT_RUN = ["several GPUs (NCCL)", "a full training schedule"]
# the profiler's operators, grouped by what a reader would change to make them faster
GROUPS = {"matrix products": ("aten::mm", "aten::addmm", "aten::bmm"),
          "attention (cuDNN)": ("aten::_cudnn_attention_forward", "aten::_cudnn_attention_backward"),
          "fused by the compiler (Triton)": ("triton_",)}
UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6}


def read_env(path):
    """env.txt: the date, GPU, versions, cores and commit lines, then one line per step."""
    lines = path.read_text().splitlines() if path.exists() else []
    head = [line for line in lines if ": exit " not in line and not line.startswith("done after")
            and not line.startswith("wrote ")]
    steps = [line for line in lines if ": exit " in line]
    return head, steps


def hardware(head):
    """The machine, from env.txt's head: its GPU line, the versions line and the core count."""
    hw = {}
    for line in head:
        if m := re.fullmatch(r"(.+), (\d+) MiB, ([\d.]+)", line):
            hw.update(gpu=m[1], gpu_memory_mib=int(m[2]), driver=m[3])
        elif line.startswith("torch "):
            words = line.split()
            hw.update(dict(zip(words[::2], words[1::2])))
        elif line.isdigit():
            hw["cpu_count"] = int(line)
    return hw


def read_log(path):
    """A training log as {step: row}, numbers as floats."""
    if not path.exists():
        return {}
    with open(path, newline="") as f:
        return {int(row["step"]): {k: float(v) for k, v in row.items() if v not in ("", None)}
                for row in csv.DictReader(f)}


def variants(bench):
    """preset -> variant -> the measurements a reader compares."""
    keys = ("per_step", "step_s", "tps", "mfu", "peak", "warmup_s", "warmup_step_s", "graphs_warmup",
            "graphs_timed", "top_kernels")
    return {preset: {"pad_to": p["pad_to"], "distinct_shapes": len(p["shapes"]),
                     "tgt_tokens_per_step": p["tgt_tokens_per_step"],
                     "flops_per_step": p["flops_per_step"],
                     **{name: {k: v[k] for k in keys if k in v} for name, v in p["variants"].items()}}
            for preset, p in bench["presets"].items()}


def seconds(text):
    """'128.892ms' -> 0.128892."""
    m = re.fullmatch(r"([\d.]+)(s|ms|us)", text)
    return float(m[1]) * UNITS[m[2]]


def gpu_time(ours, profiled_steps=3):
    """Where a profiled step's time goes: the GPU's kernel time per step against the step's wall time
    (the rest the GPU waits for the host), and the kernel time of each group of operators."""
    table = ours.get("top_kernels")
    if not table or "Self CUDA time total" not in table:
        return None
    kernel_s = seconds(re.search(r"Self CUDA time total: (\S+)", table)[1]) / profiled_steps
    step_s = statistics.mean(ours["step_s"][:profiled_steps])
    shares, operators = dict.fromkeys(GROUPS, 0.0), []
    for line in table.splitlines():
        # operator rows (some CPU time of their own): their kernels' time is charged to them; the
        # kernels' own rows, with no CPU time, would count it twice
        cols = re.split(r"\s{2,}", line.strip())
        if len(cols) != 11 or not cols[4].endswith("s") or cols[2] in ("0.000us", "Self CPU"):
            continue
        gpu_s = seconds(cols[6]) / profiled_steps
        operators.append({"name": cols[0], "kernel_seconds_per_step": gpu_s,
                          "share": gpu_s / kernel_s, "calls_per_step": int(cols[10]) / profiled_steps})
        for group, prefixes in GROUPS.items():
            if cols[0].startswith(prefixes):
                shares[group] += gpu_s / kernel_s
    shares["everything else"] = 1 - sum(shares.values())
    return {"profiled_steps": profiled_steps, "kernel_seconds_per_step": kernel_s,
            "step_seconds": step_s, "gpu_busy_fraction": kernel_s / step_s,
            "kernel_time_shares": shares, "operators": operators}


def step_seconds(log):
    """{step: seconds it took} for the steps after the first (which compiles), from a log's elapsed time;
    empty for a log without it."""
    return {s: log[s]["elapsed_s"] - log[s - 1]["elapsed_s"] for s in log
            if s - 1 in log and "elapsed_s" in log[s] and "elapsed_s" in log[s - 1]}


def training(out):
    """The two wmt-news-base runs: their speed, and their losses at the steps both reached."""
    runs = {name: read_log(out / f"train_{name}_log.csv") for name in ("eager", "compiled")}
    took = {name: step_seconds(log) for name, log in runs.items()}
    summary = {name: {
        "steps": max(log, default=0),
        "median_tokens_per_s": statistics.median(r["tokens_per_s"] for r in log.values()) if log else None,
        "first_step_s": log.get(1, {}).get("elapsed_s"),
        "longest_later_step_s": max(took[name].values(), default=None)} for name, log in runs.items()}
    common = sorted(set(runs["eager"]) & set(runs["compiled"]))
    pairs = [[s, runs["eager"][s]["loss"], runs["compiled"][s]["loss"]] for s in common]
    summary["loss_at_common_steps"] = pairs
    summary["max_loss_difference"] = max((abs(a - b) for _, a, b in pairs), default=None)
    later = sorted(set(took["eager"]) & set(took["compiled"]))
    if later:     # the same steps, after the first: mean seconds per step of each
        mean = {n: statistics.mean(took[n][s] for s in later) for n in runs}
        summary["steps_compared"] = [later[0], later[-1]]
        summary["mean_step_s"] = mean
        summary["compiled_speedup"] = mean["eager"] / mean["compiled"]
    return summary


def later_calls(out, benchmarks):
    """Benchmarks added by hand from calls of their own: name -> (step line, JSON)."""
    found = {}
    for path in sorted(out.glob("bench_*.json")):
        if path.stem in benchmarks:
            continue
        log = out / f"{path.stem}.log"
        last = log.read_text().rstrip().splitlines()[-1] if log.exists() else ""
        if not last.startswith(f"{path.stem}: exit "):
            sys.exit(f"{path}: its log {log.name} must end with its step line ('{path.stem}: exit ...')")
        found[path.stem] = (last, json.loads(path.read_text()))
    return found


def summary_of(bench):
    return {"device": bench["device"], "precision": bench["precision"], "compile": bench["compile"],
            "matmul_tflops": bench["matmul_tflops"], "presets": variants(bench)}


def main(argv=None):
    out = Path((argv or sys.argv[1:])[0])
    head, steps = read_env(out / "env.txt")
    record = {"what": "the compiled training step on one GPU: benchmark eager and compiled, and the "
                      "wmt-news-base profile eager and compiled on the same batches",
              "command": f"scripts/gpu_compile.sh {out.name}", "date": head[0] if head else None,
              "commit": next((line for line in head if re.fullmatch(r"[0-9a-f]{40}", line)), None),
              "hardware": hardware(head), "environment": head, "steps": steps,
              "benchmarks": {}, "later_calls": {}, "missing": [], "not_run": NOT_RUN, "mfu_goal": MFU_GOAL}
    benchmarks = [line.split(":")[0] for line in steps if line.startswith("bench_")]
    for name in benchmarks:
        path = out / f"{name}.json"
        if path.exists():
            record["benchmarks"][name] = summary_of(json.loads(path.read_text()))
        else:
            record["missing"].append(f"{name}.json: the step was cut off or failed (see steps)")
    for name, (line, bench) in later_calls(out, benchmarks).items():
        record["later_calls"][name] = {"step": line, "command": line.split("): ", 1)[1], **summary_of(bench)}
    eager = record["benchmarks"].get("bench_eager", {}).get("presets", {}).get("base", {})
    # the script's own compiled base step, else one from a later call
    for name in ("bench_compiled_base", *record["later_calls"]):
        source = record["benchmarks"].get(name) or record["later_calls"].get(name)
        compiled = (source or {}).get("presets", {}).get("base", {})
        if "ours" in compiled and compiled["pad_to"]:
            break
    else:
        compiled, name = {}, None
    if "ours" in compiled:
        ours, same_call = compiled["ours"], name in record["benchmarks"]
        record["base_compiled"] = {
            "from": name, "same_call_as_eager": same_call,
            "tokens_per_s": ours["tps"], "mfu": ours["mfu"], "mfu_goal_met": ours["mfu"] >= MFU_GOAL,
            "compile_s": ours["warmup_step_s"][0], "graphs_warmup": ours.get("graphs_warmup"),
            "recompiled_while_timed": ours.get("graphs_timed", 0) > 0,
            "projected_base_schedule_hours": ours["per_step"] * BASE_STEPS / 3600,
            # a ratio only within one call: two machine starts of one kind differ (see the README)
            "vs_eager": ours["tps"] / eager["ours"]["tps"] if same_call and "ours" in eager else None,
            "vs_reference_compiled": ours["tps"] / compiled["reference"]["tps"] if "reference" in compiled
            else None,
            "gpu_time": gpu_time(ours)}
    record["training"] = training(out)
    (out / "record.json").write_text(json.dumps(record, indent=1) + "\n")
    print(f"wrote {out / 'record.json'}")


if __name__ == "__main__":
    main()
