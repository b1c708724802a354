"""Table 4's semi-supervised row as a learning curve: the paper's parser against the number of silver trees.

    python scripts/parsing_curve.py      # reads the points' records; seconds

Each point is a run of scripts/parsing.py: the WSJ-only run (0 silver trees) and `--silver N` for each of
CURVE_SIZES (transformer/parser_training.py, with CURVE_RULE and VERDICT_RULE). This command trains
nothing; it reads each point's record and test trees, refuses a point whose record names uncommitted code
or a commit that is not in the history, and writes results/parsing-curve/curve.json: per point the test
and dev F1, the machine it trained on, how many of its PP brackets open at a word tagged IN or TO, and F1
by sentence length; the same for the PCFG (tagger's tags) and the variant told which
word it is on (WSJ only), drawn as lines beside the curve; and the verdict by VERDICT_RULE, once every point
has a record. A point still to run is listed with its command.
"""
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from transformer.parser_training import CURVE_RULE, CURVE_SIZES, curve_point, curve_verdict  # noqa: E402
from transformer.machine import hardware_line  # noqa: E402
from transformer.parsing import f1_by_length, opening_tags, read_trees, read_treebank  # noqa: E402
from transformer.runlog import write_record  # noqa: E402

RESULTS = ROOT / "results"
# the WSJ-only run is the curve's first point; the lines it is read against
POINTS = {n: curve_point(n) for n in (0, *CURVE_SIZES)}
LINES = {"PCFG, tagger's tags": ("parsing/baselines.json", "parsing/pcfg.tagger.test.pred.mrg"),
         "variant told its word, WSJ only": ("parsing-pointerXX/results.json", "parsing-pointerXX/test.pred.mrg")}


def in_history(commit: str | None) -> bool:
    done = subprocess.run(["git", "cat-file", "-e", f"{commit}^{{commit}}"], cwd=ROOT, capture_output=True)
    return bool(commit) and done.returncode == 0


def measured(gold, trees) -> dict:
    pp = opening_tags(gold, trees)["PP"]
    return {"pp_at_in_to": round(100 * pp["opening"] / max(pp["brackets"], 1), 2), "pp_brackets": pp["brackets"],
            "f1_by_length": [{**b, "f1": None if b["f1"] is None else round(b["f1"], 3)}
                             for b in f1_by_length(gold, trees)]}


def main(argv=None):
    gold = read_treebank()["test"]
    points, missing, refused = {}, {}, {}
    for size, folder in POINTS.items():
        path = RESULTS / folder / "results.json"
        if not path.exists():
            missing[size] = "python scripts/parsing.py " + (f"--silver {size}" if size else "--from-pilot attn0.1")
            continue
        record = json.loads(path.read_text())
        if record.get("uncommitted") or not in_history(record.get("commit")):
            refused[size] = (f"{path.relative_to(ROOT)}: commit {record.get('commit')}, uncommitted "
                             f"{record.get('uncommitted')}")
            continue
        points[size] = {"record": str(path.relative_to(ROOT)), "commit": record["commit"],
                        "test_f1": record["test"]["f1"], "dev_f1": record["dev"]["f1"],
                        "train_pairs": record["training"]["train_pairs"], "steps": record["training"]["steps"],
                        "stopped_by": record["training"]["stopped_by"],
                        "train_minutes": record["training"]["train_minutes"],
                        "hardware": hardware_line(record["hardware"]),
                        **measured(gold, read_trees(path.with_name("test.pred.mrg")))}
    lines = {}
    for name, (record, trees) in LINES.items():
        scores = json.loads((RESULTS / record).read_text())["test"]
        f1 = scores["PCFG, tagger's tags"]["f1"] if "PCFG, tagger's tags" in scores else scores["f1"]
        lines[name] = {"record": f"results/{record}", "test_f1": f1, **measured(gold, read_trees(RESULTS / trees))}
    record = {"task": "the paper's parser (post-norm, chapter 6.3's profile) against the number of silver trees",
              "curve_rule": CURVE_RULE, "sizes": list(POINTS), "points": points, "lines": lines,
              "missing": missing, "refused": refused, "verdict": curve_verdict(points),
              "test_sentences": len(gold)}
    write_record(RESULTS / "parsing-curve" / "curve.json", record, "python scripts/parsing_curve.py")
    for size, p in points.items():
        print(f"{size:>6} silver trees: test F1 {p['test_f1']:.2f}, dev F1 {p['dev_f1']:.2f}, "
              f"PP at IN/TO {p['pp_at_in_to']:.0f}%")
    for size, command in missing.items():
        print(f"{size:>6} silver trees: to run ({command})")
    for size, why in refused.items():
        print(f"{size:>6} silver trees: refused, not from committed code ({why})")
    print("verdict:", record["verdict"] and record["verdict"]["outcome"])


if __name__ == "__main__":
    main()
