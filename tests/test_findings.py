"""The results pages state what their records say: every number in their prose is a finding put in
when the book is built (`{{ name }}`, transformer.findings and _ext/findings.py), never typed, and
their prose describes what the records hold, not how the book changed.

The scan reads the markdown of each results page, leaves out math, code, links' targets and
substitutions, and fails on any number that remains, except references to the paper's sections,
tables, figures and equations, and a short list per page, each with its reason. The pages listed in
PENDING are not converted yet: their test is expected to fail (strict), so it turns red the day one
passes and must move to RESULTS_PAGES.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.conftest import REPO
from transformer import findings

RESULTS = REPO / "results"
RESULTS_PAGES = ["book/index", "book/05_2_engineering#what-one-gpu-measured", "book/06_1_evaluation",
                 "book/06_1_recipes", "book/06_2_model_variations", "book/06_2_sweeps",
                 "book/06_3_constituency_parsing", "book/06_3_parsing_runs", "book/07_conclusion", "book/A1_english_chinese",
                 "book/A2_vision_transformer"]
# the pages that lead with findings, and leave the protocol and the pilots to a continued page
FINDINGS_PAGES = {"book/06_1_evaluation": "book/06_1_recipes",
                  "book/06_2_model_variations": "book/06_2_sweeps",
                  "book/06_3_constituency_parsing": "book/06_3_parsing_runs"}
MAX_WORDS = 4000
PENDING: list[str] = []

# numbers that are no result, by page, each with its reason
ALLOWED = {
    "book/06_1_evaluation": {
        "1,000 times": "the bootstrap's resamples, sacreBLEU's default",
        "95% interval": "the interval's level, a convention",
        "at most 12 words": "the rule that picks the worked example, in the cell beside it",
        "the last 1, 5 and 10 checkpoints": "an exercise: counts to try",
    },
    "book/06_3_constituency_parsing": {
        "5% sample": "the name of NLTK's sample of the treebank",
        "NLTK 3.10": "a version",
        "199 files": "the files of the sample, a property of the data",
        "sections 02-21 train, 22 dev, 23 test": "the full treebank's usual split, a convention",
        "S(0,6), NP(0,2), VP(2,6), PP(3,6), NP(4,6)": "a tree worked out by hand, checked below",
        "PP is (3,4) while its VP is (2,6)": "the same worked example",
        "= F1 = 80%": "the same worked example",
        "from (1,4) to (1,3)": "a second worked example",
        "middle 95%": "the interval's level, a convention",
        "more than 30 words": "an exercise: a length to try",
    },
    "book/06_2_sweeps": {
        "its first 200 steps": "how the short sweep's factor was chosen, which no record holds (the "
                               "text says so)",
        "10 steps on the first 3,000 training pairs with a 1,000-token vocabulary, scored on 50 dev":
            "the live run's settings, in the cell below",
    },
    "book/06_3_parsing_runs": {
        "5% sample": "the name of NLTK's sample of the treebank",
        "its last 20 files": "the test split's files, a property of the data",
    },
    "book/A1_english_chinese": {
        "0.8": "the zh-en profile's rate factor at the first record's commit, which that record names "
               "but does not hold",
        "first 200 seen pairs": "how many seen pairs the stop rule translates after each round, "
                                "SEEN_PER_ROUND of scripts/zh_en.py, which the record does not hold",
        "first 500 pairs": "how many training pairs the first record's script scored, a constant of the "
                           "code at its commit, which the record does not hold",
    },
    "book/A2_vision_transformer": {
        "16x16": "the title of the cited paper",
        "0 to 16; dividing by 16": "the digits' pixel values, a property of the data set",
        "64 raw pixels": "the digits' 8x8 pixels",
        "2x2": "the patch size of the live run, set in the cell below it",
        "16 patches": "8x8 pixels cut into 2x2 patches",
        "17 tokens": "16 patches and the class token",
        "4x4": "16 patches laid out as the image",
        "1/16": "uniform attention over 16 patches",
        "10%": "ten classes: the accuracy of a guess",
    },
}
# the paper's sections, and what a number after these words names
SECTIONS = {"1", "2", "3", "3.1", "3.2", "3.2.1", "3.2.2", "3.2.3", "3.3", "3.4", "3.5", "3.6", "4", "5",
            "5.1", "5.2", "5.3", "5.4", "5.5", "6", "6.1", "6.2", "6.3", "7"}
NAMING = re.compile(r"(?:Table|Tables|Figure|equation|Equation|chapter|Chapter|section|Section|sections|"
                    r"Sections|row|rows|Appendix|part|seed|§)\s*\(?$")
# where a section's number alone names it: a link's words, a heading, a table's cell
SECTION_PLACE = re.compile(r"(?:\[|^#+ |\| )$")
UNIT = re.compile(r"^\s*(?:BLEU|F1|points?|perplexity|%|times|x\b|nats?|percent)")

MATH = re.compile(r"\$\$.+?\$\$|(?<![\\$])\$(?!\s)[^$]+?(?<![\s\\])\$", re.S)
FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)
CODE = re.compile(r"(`+)(.+?)\1", re.S)
SUBSTITUTION = re.compile(r"\{\{\s*(\w+)\s*\}\}")
TARGETS = re.compile(r"\]\([^)]*\)|<[^>]+>|^\(?[\w-]+\)=$", re.M)
# an ordered list's markers, and a date (when a rule was written)
MARKERS = re.compile(r"^\s*\d+\.(?=\s)|\b\d{4}-\d{2}-\d{2}\b", re.M)
NUMBER = re.compile(r"(?<![\w.])\d[\d,.]*(?<![.,])%?(?![\w])")


def markdown(page: str, root: Path = REPO) -> list[str]:
    """The markdown cells of a page; "page#label": from the cell that holds "(label)=" on."""
    page, _, label = page.partition("#")
    notebook = json.loads((root / f"{page}.ipynb").read_text(encoding="utf-8"))
    cells = ["".join(cell["source"]) for cell in notebook["cells"] if cell["cell_type"] == "markdown"]
    if label:
        cells = cells[next(i for i, cell in enumerate(cells) if f"({label})=" in cell):]
    return cells


def blanked(text: str) -> str:
    """The prose of a cell with what the scan skips replaced by spaces (so positions stay)."""
    for pattern in (FENCE, MATH, SUBSTITUTION, CODE, TARGETS, MARKERS):
        text = pattern.sub(lambda m: " " * len(m.group(0)), text)
    return text


def typed_numbers(page: str, root: Path = REPO) -> list[str]:
    """Each number typed in digits into the page's prose, in its context, that is neither a
    reference to a section, table, figure or equation nor allowed for the page."""
    allowed, found = ALLOWED.get(page, {}), []
    for cell in markdown(page, root):
        text = re.sub(r"\s+", " ", blanked(cell))
        for phrase in allowed:
            text = text.replace(phrase, " " * len(phrase))
        for match in NUMBER.finditer(text):
            number, before, after = match.group(0), text[:match.start()], text[match.end():]
            # a section by its number alone (6.2), or any number after "Table", "chapter", ...
            if NAMING.search(before[-12:]) or (number in SECTIONS and not UNIT.match(after) and (
                    "." in number or SECTION_PLACE.search(before[-4:]))):
                continue
            found.append(" ".join(text[max(0, match.start() - 40):match.end() + 20].split()))
    return found


@pytest.mark.parametrize("page", RESULTS_PAGES + [pytest.param(p, marks=pytest.mark.xfail(
    strict=True, reason="numbers not yet put in from the records")) for p in PENDING])
def test_a_results_page_types_no_number_that_a_record_holds(page):
    typed = typed_numbers(page)
    assert not typed, f"{page}: numbers typed into the prose (make each a finding): {typed}"


def test_the_scan_finds_a_typed_number(tmp_path):
    """The scan itself: a result typed back into a converted page is found; math, code,
    substitutions and section references are not."""
    cell = ("The model scores {{ m30k_cores }} BLEU ($n = 3$, `beam 4`), see 6.2 and Table 3;"
            " a typed 38.53 BLEU and 3 seeds.")
    (tmp_path / "book").mkdir()
    (tmp_path / "book" / "page.ipynb").write_text(json.dumps(
        {"cells": [{"cell_type": "markdown", "source": [cell]}]}), encoding="utf-8")
    found = typed_numbers("book/page", tmp_path)
    assert len(found) == 2 and "a typed 38.53 BLEU" in found[0] and "and 3 seeds" in found[1]


def pages_markdown() -> dict[str, str]:
    """Every page's markdown, whole."""
    return {path.relative_to(REPO).with_suffix("").as_posix(): "\n".join(markdown(
        path.relative_to(REPO).with_suffix("").as_posix())) for path in sorted((REPO / "book").glob("*.ipynb"))}


def test_every_substitution_names_a_finding_and_every_finding_is_read():
    used = {name for text in pages_markdown().values() for name in SUBSTITUTION.findall(text)}
    unknown = used - set(findings.FINDINGS)
    assert not unknown, f"pages use substitutions that name no finding: {sorted(unknown)}"
    unused = set(findings.FINDINGS) - used
    assert not unused, f"findings that no page states (remove them, or state them): {sorted(unused)}"
    for language in findings.LANGUAGES:
        values = findings.substitutions(RESULTS, language)
        assert all(values[name].strip() for name in used), "a finding that reads as nothing"


def test_a_missing_record_is_named():
    with pytest.raises(findings.FindingError, match="table3_budget_epochs.*table3/protocol.json"):
        findings.text("table3_budget_epochs", REPO / "no-such-results")
    with pytest.raises(findings.FindingError, match="no finding named"):
        findings.text("no_such_finding", RESULTS)


# words that tell how the book changed, not what the records hold (records and git keep history)
HISTORY = re.compile(r"\b(?:now|no longer|began to|still|of the time|the first runs)\b", re.I)


@pytest.mark.parametrize("page", RESULTS_PAGES)
def test_a_results_page_describes_the_records_not_their_history(page):
    found = [" ".join(blanked(cell)[max(0, m.start() - 40):m.end() + 30].split())
             for cell in markdown(page) for m in HISTORY.finditer(blanked(cell))]
    assert not found, f"{page}: words of the book's history: {found}"


@pytest.mark.parametrize("page", sorted(FINDINGS_PAGES))
def test_a_findings_page_is_short_and_its_lab_notes_follow_it(page):
    words = sum(len(cell.split()) for cell in markdown(page))
    assert words <= MAX_WORDS, f"{page}: {words} words of prose, more than {MAX_WORDS}"
    toc = (REPO / "_toc.yml").read_text(encoding="utf-8")
    assert toc.index(f"file: {page}\n") < toc.index(f"file: {FINDINGS_PAGES[page]}\n")
