"""record.json for scripts/gpu_compile.sh: what its steps measured, read from the files it left.

    python scripts/gpu_compile_record.py OUT_DIR

Reads env.txt (date, GPU, versions, commit, how each step ended), the benchmark's JSON files and the two
training logs, and writes OUT_DIR/record.json. A step that was cut off or failed leaves no JSON, and the
record says so rather than guessing: every number in it was measured by the step it names.
"""
import csv
import json
import statistics
import sys
from pathlib import Path

# the paper's base schedule, and the goal for the compiled base step's model FLOPs utilisation
BASE_STEPS, MFU_GOAL = 100_000, 0.35
BENCHMARKS = ("bench_eager", "bench_compiled_base", "bench_compiled_big")
NOT_RUN = ["several GPUs (NCCL)", "a full training schedule"]


def read_env(path):
    """env.txt: the date, GPU, versions, cores and commit lines, then one line per step."""
    lines = path.read_text().splitlines() if path.exists() else []
    head = [line for line in lines if ": exit " not in line and not line.startswith("done after")]
    steps = [line for line in lines if ": exit " in line]
    return head, steps


def read_log(path):
    """A training log as {step: row}, numbers as floats."""
    if not path.exists():
        return {}
    with open(path, newline="") as f:
        return {int(row["step"]): {k: float(v) for k, v in row.items() if v not in ("", None)}
                for row in csv.DictReader(f)}


def variants(bench):
    """preset -> variant -> the measurements a reader compares."""
    keys = ("per_step", "tps", "mfu", "peak", "warmup_s", "warmup_step_s", "graphs_warmup", "graphs_timed",
            "top_kernels")
    return {preset: {"pad_to": p["pad_to"], "distinct_shapes": len(p["shapes"]),
                     "tgt_tokens_per_step": p["tgt_tokens_per_step"],
                     **{name: {k: v[k] for k in keys if k in v} for name, v in p["variants"].items()}}
            for preset, p in bench["presets"].items()}


def training(out):
    """The two wmt-news-base runs: their speed, and their losses at the steps both reached."""
    runs = {name: read_log(out / f"train_{name}_log.csv") for name in ("eager", "compiled")}
    summary = {name: {"steps": max(log, default=0),
                      "median_tokens_per_s": statistics.median(r["tokens_per_s"] for r in log.values())
                      if log else None} for name, log in runs.items()}
    common = sorted(set(runs["eager"]) & set(runs["compiled"]))
    pairs = [[s, runs["eager"][s]["loss"], runs["compiled"][s]["loss"]] for s in common]
    summary["loss_at_common_steps"] = pairs
    summary["max_loss_difference"] = max((abs(a - b) for _, a, b in pairs), default=None)
    return summary


def main(argv=None):
    out = Path((argv or sys.argv[1:])[0])
    head, steps = read_env(out / "env.txt")
    record = {"what": "the compiled training step on one GPU: benchmark eager and compiled, and the "
                      "wmt-news-base profile eager and compiled on the same batches",
              "command": f"scripts/gpu_compile.sh {out.name}", "environment": head, "steps": steps,
              "benchmarks": {}, "missing": [], "not_run": NOT_RUN, "mfu_goal": MFU_GOAL}
    for name in BENCHMARKS:
        path = out / f"{name}.json"
        if path.exists():
            bench = json.loads(path.read_text())
            record["benchmarks"][name] = {"device": bench["device"], "precision": bench["precision"],
                                          "compile": bench["compile"], "matmul_tflops": bench["matmul_tflops"],
                                          "presets": variants(bench)}
        else:
            record["missing"].append(f"{name}.json: the step was cut off or failed (see steps)")
    compiled = record["benchmarks"].get("bench_compiled_base", {}).get("presets", {}).get("base", {})
    eager = record["benchmarks"].get("bench_eager", {}).get("presets", {}).get("base", {})
    if "ours" in compiled:
        ours = compiled["ours"]
        record["base_compiled"] = {
            "tokens_per_s": ours["tps"], "mfu": ours["mfu"], "mfu_goal_met": ours["mfu"] >= MFU_GOAL,
            "recompiled_while_timed": ours.get("graphs_timed", 0) > 0,
            "projected_base_schedule_hours": ours["per_step"] * BASE_STEPS / 3600,
            "vs_eager": ours["tps"] / eager["ours"]["tps"] if "ours" in eager else None,
            "vs_reference_compiled": ours["tps"] / compiled["reference"]["tps"] if "reference" in compiled
            else None}
    record["training"] = training(out)
    (out / "record.json").write_text(json.dumps(record, indent=1) + "\n")
    print(f"wrote {out / 'record.json'}")


if __name__ == "__main__":
    main()
