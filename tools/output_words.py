"""How much English the output areas of a built edition show: words of two or more Latin letters in the
cell outputs, by page, outside what is not prose.

    python tools/output_words.py _build/html/zh      # the Chinese edition (after make book-zh)
    python tools/output_words.py _build/html         # the English one, for comparison

Not counted, as the issue on the Chinese edition's evidence asks: code (inline code, and any token that
holds a digit, an underscore, a slash, an equals sign, brackets, a call's parenthesis, a dotted name or a
colon between letters: paths, commands, dicts, identifiers, printed Python values, operator names such as
aten::mm, sacreBLEU's signature tok:none; a printed value that frames a line, as the Chinese build reads
it; words with a capital inside, which are class and error names: ValueError, GRUCell; Python's literals
True, False, None and nan; subword pieces, marked ▁), mathematics, figures (their words are counted as
text of their own), names in capitals (model and corpus names, tree labels such as NP: PCFG, BLEU, WSJ),
the names in NAMES, the authors' names of a citation standing alone ("Vinyals & Kaiser 等（2014）"), the
words in KEPT (model names, option values, the paper's title, terms both editions write alike) and
UNITS, and the German of translation examples: a line in which at least a quarter of the words, and two
or more, are German function words or common German nouns, or in which most words are German, that is
words of the German side of Multi30k's training text, or of the WMT test sets, that the English side of
the same text never uses (where the data folder, $TRANSFORMER_DATA, holds them). Everything else counts.
A second column gives, of the counted words, those in lines that hold an English sentence of the corpora
the book translates (Multi30k, the WMT test and dev sets, the English side of the English-Chinese
corpus): the inputs and references of translation examples, which no edition translates. A line of two
sentences joined by " -> " (an example and its translation) is judged side by side.
"""
import re
import sys
from functools import cache
from pathlib import Path

from bs4 import BeautifulSoup

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "_ext"))
from outputs import label_of  # noqa: E402

from transformer.corpora import data_dir  # noqa: E402

NAMES = {"Transformer", "Transformers", "PyTorch", "CTranslate", "SentencePiece", "Multi", "Xeon", "Intel",
         "Processor", "EPYC", "GRUCell", "BerkeleyParser", "Adam", "sacreBLEU", "Moses", "Penn", "Treebank",
         "Python", "Chromium", "Glorot", "Wu", "Vision",
         # corpus names as the records key them
         "multi30k", "ptb", "wsj", "brown"}
# words that both editions write in Latin letters: the presets' and Table 3's model names, option values
# that are code (positional encodings, the eager mode), the paper's title, venue and "et al.", and the
# terms the glossary keeps as they are (dropout, softmax, lr, FLOPs)
KEPT = {"tiny", "small", "base", "big", "sinusoidal", "learned", "rotary", "eager", "Attention", "Is", "All",
        "You", "Need", "NeurIPS", "et", "al", "dropout", "softmax", "lr", "FLOPs", "torch", "python", "zh",
        "en", "de", "min", "alpha", "logits", "log", "autograd", "autocast", "cpu", "id", "ids",
        # the normalisation rule of a vocabulary, an option value of SentencePiece
        "identity",
        # the parsing pilots' names, which commands take (--from-pilot attn0.1)
        "rate", "vocab", "attn", "semi", "bpe"}
# units, which Chinese text writes in Latin letters too (GiB is also a German word)
UNITS = {"GiB", "MiB", "ms", "nats"}
GERMAN = {"der", "die", "das", "den", "dem", "des", "ein", "eine", "einer", "einem", "einen", "und", "mit",
          "auf", "von", "im", "zu", "sich", "vor", "ist", "sind", "hat", "bei", "nach",
          "aus", "zwei", "drei", "Mann", "Frau", "Männer", "Frauen", "Kind", "Junge", "Mädchen", "Hund"}
CODE_LIKE = re.compile(r"[\d_/\\=<>{}\[\]@#|▁]|--|\w\.\w|^\$|\w\(|::|\w:\w")
# a class or error name (a capital inside the word), and Python's printed literals
IDENTIFIER = re.compile(r"[a-z][A-Z]")
LITERALS = {"True", "False", "None", "nan", "inf"}
# a citation standing alone: its authors' names and year
CITATION = re.compile(r"^[A-Z][\w-]+(?: & [A-Z][\w-]+)?(?: 等)?（\d{4}）$")
WORD = re.compile(r"(?<![\w-])[A-Za-z][A-Za-z]+(?![\w-])")
LETTERS = re.compile(r"[^a-z]+")
# the English sentences of translation examples: the English sides of the test and dev sets, and of
# Multi30k's training text, whose pairs 5.1 shows
EXAMPLES = ("multi30k/test_2016_flickr.en", "multi30k/val.en", "multi30k/train.en",
            "wmt14-en-de/newstest2013.en", "wmt14-en-de/newstest2014.en", "zh-en-seed/en.test.txt",
            "zh-en-seed/en.txt")
# parallel texts whose German side holds the German of the book's translation examples
PARALLEL = ("multi30k/train", "wmt14-en-de/newstest2013", "wmt14-en-de/newstest2014")
# a printed Python value (a dict, list or tuple of strings): code, however many words its strings hold
REPR = re.compile(r"[\[{(]'[^\]})]*[\]})]")


def plain(text: str) -> str:
    return LETTERS.sub(" ", text.lower()).strip()


@cache
def german_words() -> frozenset[str]:
    """Words of a parallel text's German side that its English side never uses, over the texts
    (empty without the data)."""
    found = set()
    for stem in PARALLEL:
        de, en = data_dir() / f"{stem}.de", data_dir() / f"{stem}.en"
        if de.is_file() and en.is_file():
            found |= (set(plain(de.read_text(encoding="utf-8")).split())
                      - set(plain(en.read_text(encoding="utf-8")).split()))
    return frozenset(found)


@cache
def example_sentences() -> frozenset[str]:
    found = set()
    for name in EXAMPLES:
        if (data_dir() / name).is_file():
            found |= {s for line in (data_dir() / name).read_text(encoding="utf-8").splitlines()
                      if len((s := plain(line)).split()) >= 3}
    return frozenset(found)


def line_words(line: str) -> list[str]:
    tokens = REPR.sub(" ", label_of(line.strip())).split()
    words = [w for token in tokens if not CODE_LIKE.search(token) for w in WORD.findall(token)]
    return [w for w in words if not w.isupper() and not IDENTIFIER.search(w)
            and w not in NAMES | KEPT | UNITS | LITERALS]


def is_german(words: list[str]) -> bool:
    lexicon = german_words()
    return (sum(w in GERMAN for w in words) >= max(2, len(words) // 4)
            or sum(w.lower() in lexicon for w in words) * 2 > len(words))


def is_example(line: str) -> bool:
    """The line holds an English sentence of a test or dev set (after a label such as EN : or 源句：), or
    three words or more of one, where a long sentence is wrapped over lines."""
    text = plain(line)
    return (any(text.endswith(s) or text.startswith(s) for s in example_sentences() if len(s) > 12
                and s[:12] in text)
            or len(text.split()) >= 3 and any(text in s for s in example_sentences()))


def count(site: Path) -> dict[str, tuple[int, int]]:
    """The words counted by page, and how many of them are in example sentences."""
    pages = {}
    for page in sorted(site.glob("book/*.html")):
        soup = BeautifulSoup(page.read_text(encoding="utf-8"), "lxml")
        found = examples = 0
        for output in soup.select("div.cell_output"):
            for skipped in output.select("svg, img, code, .math, script, style"):
                skipped.decompose()
            for whole in output.get_text("\n").splitlines():
                for line in whole.split(" -> ") if not CITATION.match(whole.strip()) else ():
                    words = line_words(line)
                    if words and not is_german(words):
                        found += len(words)
                        examples += len(words) if is_example(line) else 0
        pages[page.stem] = (found, examples)
    return pages


def main() -> None:
    site = Path(sys.argv[1] if len(sys.argv) > 1 else "_build/html/zh")
    pages = count(site)
    print(f"{'page':32} {'words':>6} {'of them in example sentences':>30}")
    for name, (found, examples) in sorted(pages.items(), key=lambda item: -item[1][0]):
        if found:
            print(f"{name:32} {found:6,} {examples:30,}")
    print(f"{'all':32} {sum(f for f, _ in pages.values()):6,} {sum(e for _, e in pages.values()):30,}")


if __name__ == "__main__":
    main()
