"""How much English the output areas of a built edition show: words of two or more Latin letters in the
cell outputs, by page, outside what is not prose.

    python tools/output_words.py _build/html/zh      # the Chinese edition (after make book-zh)
    python tools/output_words.py _build/html         # the English one, for comparison

Not counted, as the issue on the Chinese edition's evidence asks: code (inline code, and any token that
holds a digit, an underscore, a slash, an equals sign, brackets or a dotted name: paths, commands, dicts,
identifiers), mathematics, figures (their words are counted as text of their own), names in capitals
(model and corpus names, tree labels such as NP: PCFG, BLEU, WSJ) and the names in NAMES, and the German
of translation examples (a line in which at least a quarter of the words, and two or more, are German
function words or common German nouns). Everything else counts, English example sentences included.
"""
import re
import sys
from pathlib import Path

from bs4 import BeautifulSoup

NAMES = {"Transformer", "Transformers", "PyTorch", "CTranslate", "SentencePiece", "Multi", "Xeon", "Intel",
         "Processor", "EPYC", "GRUCell", "BerkeleyParser", "Adam", "sacreBLEU", "Moses", "Penn", "Treebank"}
GERMAN = {"der", "die", "das", "den", "dem", "des", "ein", "eine", "einer", "einem", "einen", "und", "mit",
          "auf", "von", "im", "zu", "sich", "vor", "ist", "sind", "hat", "bei", "nach",
          "aus", "zwei", "drei", "Mann", "Frau", "Männer", "Frauen", "Kind", "Junge", "Mädchen", "Hund"}
CODE_LIKE = re.compile(r"[\d_/\\=<>{}\[\]@#|]|--|\w\.\w|^\$|\(\)")
WORD = re.compile(r"(?<![\w-])[A-Za-z][A-Za-z]+(?![\w-])")


def line_words(line: str) -> list[str]:
    words = [w for token in line.split() if not CODE_LIKE.search(token) for w in WORD.findall(token)]
    return [w for w in words if not w.isupper() and w not in NAMES]


def is_german(words: list[str]) -> bool:
    return sum(w in GERMAN for w in words) >= max(2, len(words) // 4)


def count(site: Path) -> dict[str, int]:
    """The words counted, by page."""
    pages = {}
    for page in sorted(site.glob("book/*.html")):
        soup = BeautifulSoup(page.read_text(encoding="utf-8"), "lxml")
        found = 0
        for output in soup.select("div.cell_output"):
            for skipped in output.select("svg, img, code, .math, script, style"):
                skipped.decompose()
            for line in output.get_text("\n").splitlines():
                words = line_words(line)
                found += 0 if is_german(words) else len(words)
        pages[page.stem] = found
    return pages


def main() -> None:
    site = Path(sys.argv[1] if len(sys.argv) > 1 else "_build/html/zh")
    pages = count(site)
    for name, found in sorted(pages.items(), key=lambda item: -item[1]):
        if found:
            print(f"{name:32} {found:6,}")
    print(f"{'all':32} {sum(pages.values()):6,}")


if __name__ == "__main__":
    main()
