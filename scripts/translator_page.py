"""The page "Try the model", measured in headless Chromium on the whole Multi30k test set: how long the
page takes to be ready, words per second with greedy and beam search, and BLEU of the page's own beam
search against PyTorch's with the same (dequantised) weights. Writes results/translator/browser.json,
which the page's chapter reads.

    make book && python scripts/translator_page.py [--html _build/html] [--sentences 1000]

Measure on an otherwise idle machine: the page computes on one core.
"""
import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

import sacrebleu
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tools.browser import element, find_chromium, open_page  # noqa: E402
from transformer.corpora import load_split  # noqa: E402
from transformer.decode import translate  # noqa: E402
from transformer.runlog import write_record  # noqa: E402
from transformer.web import payload_model, read_payload  # noqa: E402

PAGE = "book/06_1_try_the_model.html"


def page_report(chromium, html_root, sentences, seconds):
    """Run the page's self-test on `sentences` in a copy of the built page; return its report."""
    with tempfile.TemporaryDirectory() as tmp:
        site = Path(tmp)
        (site / "book").mkdir()
        shutil.copytree(html_root / "translator", site / "translator")
        (site / "translator" / "sentences.js").write_text(
            "window.SELFTEST_SENTENCES = " + json.dumps(sentences) + ";\n")
        page = (html_root / PAGE).read_text()
        tag = '<script src="../translator/page.js"></script>'
        if tag not in page:
            raise SystemExit(f"{html_root / PAGE} does not load {tag}; rebuild the book (make book)")
        page = page.replace(tag, '<script src="../translator/sentences.js"></script>\n' + tag)
        (site / PAGE).write_text(page)
        url = (site / PAGE).as_uri() + f"?selftest={len(sentences)}"
        # real time: the page's clocks must measure real work
        dom = open_page(chromium, url, site, seconds, real_time=True)
    report = element(dom, "pre", "translator-selftest")
    if not report:
        raise SystemExit(f"the page wrote no report within {seconds} s:\n{dom[-2000:]}")
    return json.loads(report)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--html", default=str(ROOT / "_build" / "html"), help="the built book")
    parser.add_argument("--sentences", type=int, default=1000, help="first N test sentences")
    parser.add_argument("--out", default=str(ROOT / "results" / "translator" / "browser.json"))
    parser.add_argument("--seconds", type=int, default=1800, help="give up on the page after this")
    args = parser.parse_args()
    chromium = find_chromium()
    if chromium is None:
        raise SystemExit("headless Chromium not found (Debian's chromium package, or CHROMIUM=...)")
    html_root = Path(args.html)
    payload = read_payload(html_root / "translator" / "model.js")
    pairs = load_split("multi30k", "test")[:args.sentences]
    sources, refs = [s for s, _ in pairs], [[r for _, r in pairs]]
    print(f"the page translates {len(sources)} sentences twice (greedy, beam 4) ...", flush=True)
    # ready: from opening the built page itself (theme, 8 MB of weights) to a model able to translate
    ready = []
    for _ in range(3):
        with tempfile.TemporaryDirectory() as tmp:
            found = element(open_page(chromium, (html_root / PAGE).as_uri() + "?selftest=0",
                                      Path(tmp), 120, real_time=True), "pre", "translator-selftest")
        if not found:
            raise SystemExit("the built page wrote no report; rebuild the book (make book)")
        ready.append(json.loads(found)["ready_seconds"])
    report = page_report(chromium, html_root, sources, args.seconds)
    model, vocab = payload_model(payload)
    torch_out = {}
    for name, beam in (("greedy", 1), ("beam", payload["search"]["beam_size"])):
        torch_out[name] = translate(model, vocab, sources, beam, payload["search"]["alpha"],
                                    progress=False)
    results = report["results"]
    record = {
        "page": PAGE, "export": payload["source"], "quantization": payload["quantization"],
        "browser": report["user_agent"], "sentences": len(sources),
        "ready_seconds": round(sorted(ready)[len(ready) // 2], 2),
        "ready_seconds_all": [round(r, 2) for r in ready],
        "build_seconds": round(report["build_seconds"], 2),
        "search": payload["search"],
    }
    for name in ("greedy", "beam"):
        page_text = [r[name + "_text"] for r in results]
        record[name] = {
            "words_per_second": round(report[name]["words_per_second"], 1),
            "seconds": round(report[name]["seconds"], 1),
            "page_bleu": round(sacrebleu.corpus_bleu(page_text, refs).score, 2),
            "pytorch_bleu": round(sacrebleu.corpus_bleu(torch_out[name], refs).score, 2),
            "same_text_as_pytorch": sum(a == b for a, b in zip(page_text, torch_out[name])),
        }
    write_record(args.out, record, "python scripts/translator_page.py")
    print(json.dumps(record, indent=1))


if __name__ == "__main__":
    with torch.no_grad():
        main()
