"""When each of the parser's pilot rules (and its learning curve's) was first committed, from git's history: results/rule-commits.json.

    python tools/rule_commits.py

A pilot's rule is fixed before any of its runs trains. 6.3 (continued) sets the minute each rule was first
committed beside the minute each pilot run began, and names a run that began before its rule. The book is
also built from the source archive, which holds no history, so the answer is kept in this file, and
tests/test_rounds.py checks it against the history wherever there is one.
"""
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "results" / "rule-commits.json"
# each pilot of transformer.parser_training, by the name its rule first had in the code
RULES = {"": "PILOT_RULE = ", "vocab": "VOCAB_RULE = ", "attn": "ATTN_RULE = ", "semi": "SEMI_RULE = ",
         # the semi-supervised row's learning curve (transformer.parser_training)
         "curve": "CURVE_RULE = ", "curve verdict": "VERDICT_RULE = "}


def first_commits(root: Path = ROOT) -> dict[str, dict]:
    """{pilot name: {"name", "commit", "date"}} of the first commit whose change added the rule's name."""
    found = {}
    for pilot, needle in RULES.items():
        log = subprocess.run(["git", "log", "--reverse", "--format=%H %ct", "-S", needle],
                             capture_output=True, text=True, cwd=root, check=True).stdout.split()
        if not log:
            sys.exit(f"error: no commit adds {needle!r}")
        found[pilot] = {"name": needle.split()[0], "commit": log[0],
                        "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(int(log[1])))}
    return found


def main() -> None:
    OUT.write_text(json.dumps({"what": "the first commit that holds each pilot's rule (git log -S NAME)",
                               "command": "python tools/rule_commits.py", "rules": first_commits()},
                              indent=1) + "\n", encoding="utf-8")
    print(f"wrote {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
