"""Where the package's beam search and CTranslate2's part on the shipped model, and which of the two finds
the better translation by the model's own score: results/decoding/engines.json (chapter 6.1, deploying).

    python scripts/engines_agree.py       # about 2 minutes on a 2-core CPU

Both engines translate the Multi30k test set with beam 4 at each alpha of ALPHAS. For each sentence where
the two translations differ, the record holds both, each scored by the PyTorch model as the search ranks
finished hypotheses (log-probability over the paper's length penalty, </s> counted), and where the
package's translation ranks by log-probability alone among the hypotheses its beam finished
(decode.simple_beam_search's trace): the engine hands back at most beam-size finished hypotheses, its best
by log-probability, before translate_ids ranks them by the penalty, so a translation ranked below them is
one that the engine's interface, not its search, leaves out.
"""
import argparse
import sys
import tempfile
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from transformer.corpora import load_split  # noqa: E402
from transformer.data import BOS, EOS  # noqa: E402
from transformer.decode import (ModelEngine, length_penalty, sequence_logprob, simple_beam_search,  # noqa: E402
                                translate_text)
from transformer.deploy import CTranslate2Model, export_ctranslate2  # noqa: E402
from transformer.run import SHIPPED_MODEL, load_model  # noqa: E402
from transformer.runlog import add_uncommitted_flag, refuse_uncommitted, write_record  # noqa: E402

ALPHAS = (0.0, 0.6, 1.5)
BEAM = 4
OUT = ROOT / "results" / "decoding" / "engines.json"


def scored(model, vocab, src, translation, alpha):
    """The search's ranking score of `translation` of the encoded source `src`: log P / length_penalty, </s>
    counted."""
    out = vocab.encode(translation) + [EOS]
    return sequence_logprob(model, src, torch.tensor([out]), BOS, EOS).item() / length_penalty(len(out), alpha)


def log_prob_rank(model, vocab, src, translation, alpha):
    """Where `translation` ranks by log-probability among all the hypotheses that the package's beam
    search of the encoded source `src` finished (1 = the highest); None if it is not among them."""
    trace = []
    simple_beam_search(model, src, BOS, EOS, BEAM, alpha, trace=trace)
    ended = [e for step in trace for e in step["sentences"][0]["ended"]]
    want = vocab.encode(translation) + [EOS]
    mine = [e["logprob"] for e in ended if e["tokens"] == want]
    return 1 + sum(e["logprob"] > mine[0] for e in ended) if mine else None


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=str(OUT))
    add_uncommitted_flag(parser)
    args = parser.parse_args(argv)
    refuse_uncommitted(args.out, args.uncommitted)
    torch.set_num_threads(2)
    model, vocab, _ = load_model(SHIPPED_MODEL)
    model.eval()
    sources = [s for s, _ in load_split("multi30k", "test")]
    per_alpha = {}
    with tempfile.TemporaryDirectory() as tmp:
        export_ctranslate2(SHIPPED_MODEL, Path(tmp) / "ct2")
        engines = {"package": ModelEngine(model, vocab), "ctranslate2": CTranslate2Model(Path(tmp) / "ct2", threads=2)}
        for alpha in ALPHAS:
            out = {name: translate_text(e, sources, BEAM, alpha) for name, e in engines.items()}
            rows = []
            for i, (ours, theirs) in enumerate(zip(out["package"], out["ctranslate2"])):
                if ours != theirs:
                    src = torch.tensor([vocab.encode(sources[i]) + [EOS]])
                    score = {name: round(scored(model, vocab, src, t, alpha), 4)
                             for name, t in (("package", ours), ("ctranslate2", theirs))}
                    rows.append({"line": i + 1, "package": ours, "ctranslate2": theirs, "score": score,
                                 "higher": max(score, key=score.get) if len(set(score.values())) > 1 else "tie",
                                 "package_log_prob_rank": log_prob_rank(model, vocab, src, ours, alpha)})
            per_alpha[str(alpha)] = {
                "sentences": len(sources), "differ": len(rows),
                "higher": {k: sum(r["higher"] == k for r in rows) for k in ("ctranslate2", "package", "tie")},
                "package_below_engine_beam": sum((r["package_log_prob_rank"] or 0) > BEAM for r in rows),
                "empty": {name: sum(not t for t in o) for name, o in out.items()}, "rows": rows}
            print(f"alpha {alpha}: {len(rows)} of {len(sources)} differ; higher by the model's score: "
                  f"{per_alpha[str(alpha)]['higher']}")
    write_record(args.out, {
        "task": "the shipped model's beam-4 translations of the Multi30k test set by the package and by "
                "CTranslate2 (float32), compared sentence by sentence",
        "model": "results/multi30k-cpu/model.pt", "beam_size": BEAM, "alphas": per_alpha,
        "score": "log-probability under the PyTorch model over ((5 + length) / 6) ** alpha, </s> counted"})


if __name__ == "__main__":
    main()
