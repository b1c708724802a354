"""Mutation testing of the core modules: which subtly wrong versions of the code do the fast tests let pass?

    python tools/mutation.py            # `make mutation`: run every mutant not yet run, then report
    python tools/mutation.py --fresh    # forget earlier results (after the code changed)
    python tools/mutation.py --report   # only the report, from the results in mutants/
    python tools/mutation.py --survivors   # print the diff of every surviving mutant

mutmut (pyproject.toml, [tool.mutmut]) writes each mutant, a small change such as `+` -> `-` or
`True` -> `False`, into a copy of the package under mutants/ and runs the fast tests that reach the
changed function. A mutant is killed when a test fails. The score of a module is
killed / (mutants - equivalent), where tools/mutation_equivalent.txt lists the surviving mutants judged
to behave exactly like the original, each with the line it changes and the reason.
Not part of CI: the 3,196 mutants take about an hour on a 2-core machine (1,624 ran in 30 minutes on an
AVX2 AMD EPYC); names or patterns as arguments run only those.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EQUIVALENT = ROOT / "tools" / "mutation_equivalent.txt"

# What is scored: the model's modules whole, the training step out of step.py and data.py, and the model files
# out of checkpoint.py and run.py (the rest of those is files, processes and command lines, tested by the slower tests).
CORE = {
    "attention": ["transformer.attention.*"],
    "layers": ["transformer.layers.*"],
    "feed_forward": ["transformer.feed_forward.*"],
    "embeddings": ["transformer.embeddings.*"],
    "positional": ["transformer.positional.*"],
    "model": ["transformer.model.*"],
    "loss": ["transformer.loss.*"],
    "optim": ["transformer.optim.*"],
    "decode": ["transformer.decode.*"],
    "evaluate": ["transformer.evaluate.*"],
    # the model as evaluation loads it: averaging, the model file (until the trainer's split, part of evaluate)
    "model files": [f"transformer.checkpoint.x_{f}__mutmut_*" for f in
                    ("average_checkpoints", "save_model", "load_model_file")]
    + [f"transformer.run.x_{f}__mutmut_*" for f in ("run_profile", "load_model")],
    "training step": ["transformer.step.x_train_step__mutmut_*", "transformer.data.x_accumulation_steps__mutmut_*"],
}

STATUS = {1: "killed", 3: "killed", 0: "survived", 36: "timeout", 24: "timeout", -24: "timeout",
          152: "timeout", 255: "timeout", None: "not run", 5: "no tests", 33: "no tests", 34: "skipped",
          -11: "crashed", -9: "crashed"}


def matches(name, patterns):
    from fnmatch import fnmatch
    return any(fnmatch(name, p) for p in patterns)


def group_of(name):
    for group, patterns in CORE.items():
        if matches(name, patterns):
            return group
    return None


def results():
    """{mutant name: status} from mutmut's files under mutants/."""
    out = {}
    for meta in (ROOT / "mutants" / "transformer").glob("*.py.meta"):
        for name, code in json.loads(meta.read_text())["exit_code_by_key"].items():
            out[name] = STATUS.get(code, f"exit {code}")
    return out


def mutmut(*args, capture=False):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TRANSFORMER_PROFILE": "tiny"}
    shared = ROOT.parent / "shared" / "data"     # the tests run from mutants/, which has no such neighbour
    if "TRANSFORMER_DATA" not in env and shared.is_dir():
        env["TRANSFORMER_DATA"] = str(shared)
    return subprocess.run([sys.executable, "-m", "mutmut", *args], cwd=ROOT, env=env, check=not capture,
                          capture_output=capture, text=True)


def diff_of(name):
    """The changed lines of a mutant, as mutmut shows them ('-' original, '+' mutant)."""
    text = mutmut("show", name, capture=True).stdout
    return [line for line in text.splitlines() if line[:1] in "+-" and line[:3] not in ("+++", "---")]


def read_equivalent():
    """{mutant name: the '+' line it introduces} from tools/mutation_equivalent.txt, whose blocks are a name,
    that line, and '# reason' lines for the reader."""
    entries, name = {}, None
    for line in EQUIVALENT.read_text().splitlines() if EQUIVALENT.exists() else []:
        if line.startswith("transformer."):
            name = line.strip()
            entries[name] = None
        elif name and line.startswith("    +"):
            entries[name] = line.strip()[1:].strip()
    return entries


def report(status):
    equivalent = read_equivalent()
    confirmed, stale = set(), []
    for name, judged_line in equivalent.items():
        if status.get(name) != "survived":
            continue
        plus = [line[1:].strip() for line in diff_of(name) if line.startswith("+")]
        if judged_line in plus:
            confirmed.add(name)
        else:         # the code changed since the judgement: count the mutant as a survivor again
            stale.append(name)
    survivors = []
    print(f"\n{'module':<15}{'mutants':>8}{'killed':>8}{'timeout':>8}{'equiv.':>8}{'survived':>9}{'other':>7}"
          f"{'score':>8}")
    totals = Counter()
    for group in CORE:
        names = [n for n in status if group_of(n) == group]
        counts = Counter("equivalent" if n in confirmed else status[n] for n in names)
        killed = counts["killed"] + counts["timeout"]
        scored = len(names) - counts["equivalent"]
        other = scored - killed - counts["survived"]     # not run, or no test reaches the code
        score = 100 * killed / scored if scored else 100.0
        totals.update(mutants=len(names), killed=killed, timeout=counts["timeout"], equivalent=counts["equivalent"],
                      survived=counts["survived"], other=other)
        print(f"{group:<15}{len(names):>8}{killed:>8}{counts['timeout']:>8}{counts['equivalent']:>8}"
              f"{counts['survived']:>9}{other:>7}{score:>7.1f}%")
        survivors += [n for n in names if status[n] == "survived" and n not in confirmed]
    scored = totals["mutants"] - totals["equivalent"]
    print(f"{'all':<15}{totals['mutants']:>8}{totals['killed']:>8}{totals['timeout']:>8}{totals['equivalent']:>8}"
          f"{totals['survived']:>9}{totals['other']:>7}{100 * totals['killed'] / max(scored, 1):>7.1f}%")
    print("\n(killed counts the timeouts too; score = killed / (mutants - equivalent); other: not run, no test "
          "reaches the code, crashed)")
    if stale:
        print(f"\n{len(stale)} entries of {EQUIVALENT.name} no longer match their mutant (counted as survivors):")
        print("\n".join("  " + n for n in stale))
    if survivors:
        print(f"\n{len(survivors)} surviving mutants not judged equivalent (python tools/mutation.py --survivors):")
        print("\n".join("  " + n for n in sorted(survivors)))
    return survivors


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fresh", action="store_true", help="delete mutants/ and start over")
    parser.add_argument("--report", action="store_true", help="only print the report")
    parser.add_argument("--survivors", action="store_true", help="print the diffs of the survivors")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("names", nargs="*", help="mutant names or patterns (default: all of CORE)")
    args = parser.parse_args()
    if args.fresh:
        shutil.rmtree(ROOT / "mutants", ignore_errors=True)
    if not (args.report or args.survivors):
        patterns = args.names or [p for ps in CORE.values() for p in ps]
        mutmut("run", "--max-children", str(args.jobs), *patterns)
    status = results()
    if not status:
        sys.exit("no results under mutants/: run `make mutation` first")
    survivors = report(status)
    if args.survivors:
        for name in survivors:
            print(f"\n{name}\n" + "\n".join("    " + line for line in diff_of(name)))


if __name__ == "__main__":
    main()
