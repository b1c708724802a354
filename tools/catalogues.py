"""How far the Chinese edition's catalogues go, and whether each translation keeps what must not change.

    python tools/catalogues.py            # coverage of every page, then each problem found
    python tools/catalogues.py book/03_2_attention book/04_why_self_attention   # those pages only

A translation replaces the English words, not what the words point at or compute: every `$...$` math,
inline `code`, link target, citation key and cross-reference label of an entry's English text (its
msgid) must come back byte for byte in its translation (msgstr), an entry whose English uses a term
of the glossary (locale/zh_CN/glossary.md) must use that term's Chinese name, and its emphasis must
still close (Chinese punctuation next to `**` can keep it open). tests/test_book_zh.py
holds the catalogues to these rules and to the coverage below.
"""
import argparse
import functools
import re
import sys
from collections import Counter
from pathlib import Path

from babel.messages.pofile import read_po

ROOT = Path(__file__).resolve().parent.parent
LOCALE = ROOT / "locale" / "zh_CN"
CATALOGUES = LOCALE / "LC_MESSAGES"
OUTPUT_CATALOGUES = LOCALE / "outputs"      # the cell outputs' words (_ext/outputs.py)
GLOSSARY = LOCALE / "glossary.md"
# Translated first and kept whole: the landing page and the paper's model from idea to use.
CORE_PAGES = ["book/index", "book/01_introduction", "book/02_background", "book/03_1_encoder_decoder_stacks",
              "book/03_2_attention", "book/03_3_feed_forward", "book/03_4_embeddings_softmax",
              "book/03_5_positional_encoding", "book/03_6_full_model", "book/04_why_self_attention",
              "book/05_3_optimizer", "book/05_4_regularization", "book/06_1_decoding",
              "book/06_1_try_the_model", "book/07_conclusion"]

MATH = re.compile(r"\$\$.+?\$\$|(?<![\\$])\$(?!\s)[^$]+?(?<![\s\\])\$", re.S)
ROLE = re.compile(r"\{([a-z:]+)\}`([^`]*)`")
CODE = re.compile(r"(`+)(.+?)\1", re.S)
LINK = re.compile(r"\]\(([^)\s]*)\)|<(https?://[^>\s]+)>|href=\"([^\"]*)\"")
# a finding put in when the book is built (_ext/findings.py): its name must come back as written
SUBSTITUTION = re.compile(r"\{\{\s*\w+\s*\}\}")
# a number of a cell output's message, put back when the page is built
SLOT = re.compile(r"\{\d+\}")
CJK = re.compile(r"[\u4e00-\u9fff]")


def page_of(path: Path, folder: Path = CATALOGUES) -> str:
    return path.relative_to(folder).with_suffix("").as_posix()


def catalogues(folder: Path = CATALOGUES) -> dict:
    """page -> its catalogue (babel Catalog), for every page that has one: of the prose, or with
    OUTPUT_CATALOGUES of the cell outputs."""
    return {page_of(path, folder): read_po(path.open("rb")) for path in sorted(folder.rglob("*.po"))}


def entries(catalogue) -> list:
    return [message for message in catalogue if message.id]


def coverage(catalogue) -> tuple[int, int, int]:
    """(translated and not fuzzy, fuzzy, all) entries; a fuzzy translation is never shown."""
    messages = entries(catalogue)
    fuzzy = sum(message.fuzzy for message in messages)
    done = sum(bool(message.string) and not message.fuzzy for message in messages)
    return done, fuzzy, len(messages)


def fixed_parts(text: str) -> Counter:
    """What a translation must keep: math, roles' targets, inline code, link targets, findings, and an
    output's numbers."""
    kept = Counter(re.sub(r"\s+", "", m) for m in SUBSTITUTION.findall(text))
    text = SUBSTITUTION.sub(" ", text)
    kept.update(SLOT.findall(MATH.sub(" ", text)))
    text = MATH.sub(lambda m: kept.update([m.group(0)]) or " ", text)
    for role, content in ROLE.findall(text):
        # {ref}`words <label>`: the words may be translated, the label not; {cite}`key` keeps it all
        target = re.search(r"<([^<>]+)>$", content)
        kept[f"{{{role}}}" + (target.group(1) if target else content)] += 1
    text = ROLE.sub(" ", text)
    kept.update(match.group(0) for match in CODE.finditer(text))
    text = CODE.sub(" ", text)
    kept.update(next(group for group in match.groups() if group) for match in LINK.finditer(text))
    return kept


def prose(text: str) -> str:
    """The words of an entry, without its math, code and links (where an English term is no prose)."""
    for pattern in (SUBSTITUTION, MATH, ROLE, CODE, SLOT):
        text = pattern.sub(" ", text)
    return re.sub(r"\]\([^)]*\)|<[^>]+>", " ", text)


def glossary_tables() -> list[list[list[str]]]:
    """The glossary page's tables in order, each as the cells of its rows, the column names first (the
    separator row left out). The first holds the one-term-per-idea terms the catalogues are checked
    against; the later one the book's working words, rendered by context."""
    tables, current = [], None
    for line in GLOSSARY.read_text(encoding="utf-8").splitlines():
        if not line.strip().startswith("|"):
            current = None
            continue
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if set(cells[0]) <= set("-: "):
            continue
        if current is None:
            current = []
            tables.append(current)
        current.append(cells)
    return tables


def glossary_table(header: bool = False) -> list[list[str]]:
    """The cells of each row of the glossary's first table, the one-term-per-idea terms, after the
    column names with `header`. The page's later table (the book's working words) is not read."""
    names, *rows = glossary_tables()[0]
    return [names] * header + [cells for cells in rows if len(cells) >= 2]


def renderings(cell: str) -> list[str]:
    """The words of a glossary cell that lists several: 训练、这次训练、实验."""
    return [word.strip() for word in re.split(r"[、/,，]", cell) if word.strip()]


def glossary() -> list[tuple[list[str], str]]:
    """([English spellings], Chinese) for each row of the glossary's table."""
    return [([spelling.strip() for spelling in cells[0].split("/")], cells[1]) for cells in glossary_table()]


def also_written() -> dict[str, list[str]]:
    """Chinese term: the other renderings a reader may know or type (the column 又作), which the
    search must find too; the translation itself uses only the term."""
    names, *rows = glossary_table(header=True)
    if "又作" not in names:
        return {}
    column = names.index("又作")
    return {cells[1]: renderings(cells[column]) for cells in rows if len(cells) > column}


def working_words() -> list[str]:
    """The renderings of the glossary's later table, the book's working words (训练、这次训练、实验 for
    run): not checked as terms, but words a reader types into the search."""
    _, *rows = glossary_tables()[1]
    return [word for cells in rows if len(cells) >= 2 for word in renderings(cells[1])]


def search_terms() -> list[str]:
    """The Chinese words the search must find whole: each glossary term and its alternatives, and the
    book's working words."""
    words = ({chinese for _, chinese in glossary()} | set(working_words())
             | {word for words in also_written().values() for word in words})
    return sorted(word for word in words if CJK.search(word) and " " not in word)


def term_pattern(spelling: str) -> re.Pattern:
    # plural, possessive and hyphen or space between the words all count as the term
    words = [re.escape(word) for word in re.split(r"[\s-]+", spelling)]
    return re.compile(r"(?<![\w-])" + r"[\s-]+".join(words) + r"(?:s|es)?(?!\w)", re.I)


def lost_parts(catalogue) -> list[str]:
    """Translated entries that dropped or changed math, code, a link target or a role's target."""
    found = []
    for message in entries(catalogue):
        if message.string and not message.fuzzy:
            lost = fixed_parts(message.id) - fixed_parts(message.string)
            if lost:
                found.append(f"{message.id[:70]!r}: the translation lost {sorted(lost)}")
    return found


def terms_missing(english: str, chinese: str, terms) -> list[str]:
    """The glossary terms the English uses in its prose whose Chinese names the translation lacks."""
    words = prose(english)
    return [spellings[0] for spellings, name in terms
            if any(term_pattern(s).search(words) for s in spellings) and name not in chinese]


def missing_terms(catalogue, terms=None) -> list[str]:
    terms = glossary() if terms is None else terms
    names = {spellings[0]: name for spellings, name in terms}
    return [f"{message.id[:70]!r}: uses '{term}' but not the glossary's '{names[term]}'"
            for message in entries(catalogue) if message.string and not message.fuzzy
            for term in terms_missing(message.id, message.string, terms)]


@functools.cache
def markdown():
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark")


def stray_emphasis(text: str) -> int:
    """How many `*` and `**` of the text a Markdown parser leaves as characters: CommonMark closes
    emphasis only where the closing run is not preceded by punctuation, or followed by some, so
    `**标题。**正文` shows its asterisks and `**标题**。正文` is bold."""
    plain = MATH.sub(" ", CODE.sub(" ", ROLE.sub(" ", SUBSTITUTION.sub(" ", text))))
    rendered = re.sub(r"<[^>]+>", "", markdown().renderInline(plain))
    return len(re.findall(r"\*\*|(?<![\w*])\*(?=\S)", rendered))


def broken_emphasis(catalogue) -> list[str]:
    """Translated entries that show more asterisks than their English does (emphasis left open)."""
    return [f"{message.id[:70]!r}: emphasis that does not close in the translation"
            for message in entries(catalogue) if message.string and not message.fuzzy
            and stray_emphasis(message.string) > stray_emphasis(message.id)]


def problems(catalogue, terms=None) -> list[str]:
    return lost_parts(catalogue) + missing_terms(catalogue, terms) + broken_emphasis(catalogue)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("pages", nargs="*", help="pages such as book/03_2_attention (default: all)")
    args = parser.parse_args(argv)
    books = catalogues()
    outputs = {f"outputs/{page}": catalogue for page, catalogue in catalogues(OUTPUT_CATALOGUES).items()}
    unknown = [page for page in args.pages if page not in books]
    if unknown:
        sys.exit(f"error: no catalogue for {unknown}; pages are {sorted(books)}")
    chosen = args.pages or list(books)
    # a page's outputs after the prose of all pages
    chosen += [f"outputs/{page}" for page in chosen if f"outputs/{page}" in outputs]
    books |= outputs
    terms, total, bad = glossary(), [0, 0, 0], 0
    for page in chosen:
        done, fuzzy, count = coverage(books[page])
        total = [a + b for a, b in zip(total, (done, fuzzy, count))]
        print(f"{page:36s} {done:4d}/{count:<4d} translated {100 * done / max(count, 1):5.1f}%  fuzzy {fuzzy}")
        for problem in problems(books[page], terms):
            print(f"    {problem}")
            bad += 1
    done, fuzzy, count = total
    print(f"{'all':36s} {done:4d}/{count:<4d} translated {100 * done / max(count, 1):5.1f}%  fuzzy {fuzzy}"
          f"  problems {bad}")
    return 1 if bad or fuzzy else 0


if __name__ == "__main__":
    sys.exit(main())
