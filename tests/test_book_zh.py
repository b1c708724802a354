"""The Chinese edition: built from the same notebooks through the catalogues in locale/zh_CN, with a
language switch on every page of both editions (tools/book_zh.py, _ext/editions.py).

The catalogue tests need no build: the core pages are wholly translated, the book mostly, nothing fuzzy,
and no translation loses the math, code, links or glossary terms of its English (tools/catalogues.py).
The site tests read the book that `make book` and `make book-zh` build (the whole_book fixture).
"""
from __future__ import annotations

import html
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

# the catalogues are read with Babel and checked with markdown-it, both of the book extra: skipped
# without it, except under CI, as the other book tests are
try:
    import markdown_it  # noqa: F401
    from babel.messages.pofile import read_po
except ImportError:
    if os.environ.get("CI"):
        raise
    pytest.skip("the book extra is missing: pip install -e '.[book]'", allow_module_level=True)

from tests.conftest import REPO, need_book_extra  # noqa: E402
from tests.test_book_pages import (MACHINE_PATH, broken_links, column_check, pages, visible_text,  # noqa: E402
                                   wordless_links)
from tools import catalogues  # noqa: E402
from tools.catalogues import (CJK, CORE_PAGES, broken_emphasis, coverage, glossary, lost_parts,  # noqa: E402
                              missing_terms)

BOOK_COVERAGE = 0.80   # of all entries; the core pages: all of them


@pytest.fixture(scope="module")
def books() -> dict:
    return catalogues.catalogues()


@pytest.fixture(scope="module")
def outputs() -> dict:
    """The cell outputs' catalogues (_ext/outputs.py), by page."""
    return catalogues.catalogues(catalogues.OUTPUT_CATALOGUES)


@pytest.fixture(scope="module")
def every_catalogue(books, outputs) -> dict:
    return {**books, **{f"outputs/{page}": catalogue for page, catalogue in outputs.items()}}


def test_the_core_pages_are_wholly_translated(books):
    assert set(CORE_PAGES) <= set(books), f"core pages without a catalogue: {set(CORE_PAGES) - set(books)}"
    short = {page: "{}/{}".format(done, count) for page in CORE_PAGES
             for done, _, count in [coverage(books[page])] if done < count}
    assert not short, f"core pages not wholly translated (translated/entries): {short}"


def test_most_of_the_book_is_translated_and_nothing_is_fuzzy(books):
    done, fuzzy, count = (sum(c) for c in zip(*(coverage(catalogue) for catalogue in books.values())))
    assert done >= BOOK_COVERAGE * count, f"{done} of {count} entries translated, under {BOOK_COVERAGE:.0%}"
    assert fuzzy == 0, f"{fuzzy} fuzzy entries: check each against its new English and clear the flag"


def test_every_translation_keeps_the_math_code_and_links_of_its_english(every_catalogue):
    found = {page: lost_parts(catalogue) for page, catalogue in every_catalogue.items()}
    found = {page: problems for page, problems in found.items() if problems}
    assert not found, f"translations that changed what they must keep: {found}"


def test_every_translation_uses_the_glossarys_terms(every_catalogue):
    terms = glossary()
    assert len(terms) >= 20 and ("beam search", "束搜索") in [(t[0], c) for t, c in terms]
    found = {page: missing_terms(catalogue, terms) for page, catalogue in every_catalogue.items()}
    found = {page: problems for page, problems in found.items() if problems}
    assert not found, f"translations that do not use the glossary's term: {found}"


def test_the_glossarys_strict_rows_leave_out_the_working_words():
    """The glossary's first table holds the one-term-per-idea rows that the catalogues are checked
    against; its later table of the book's working words (run, profile, seed...) is rendered by
    context and must not become strict rows. The other renderings of the column 又作 go to search."""
    assert "| run |" in catalogues.GLOSSARY.read_text(encoding="utf-8")
    spellings = {spelling for row, _ in glossary() for spelling in row}
    assert "layer normalization" in spellings and "greedy search" in spellings
    working = {"run", "profile", "schedule", "seed", "collapse", "sweep", "ledger", "pilot", "round", "epoch",
               "kernel", "gold tree", "silver tree"}
    assert not working & spellings, f"working words read as strict glossary rows: {working & spellings}"
    assert all(len(row) >= 2 and row[1] for row in catalogues.glossary_table())
    words = set(catalogues.search_terms())
    assert {"层归一化", "掩码", "层规范化", "掩蔽", "集束搜索", "暂退法", "交叉注意力", "贪心搜索", "验证集",
            "基础模型", "大模型", "随机种子", "实验方案", "逐位置", "预实验"} <= words
    assert not any(" " in word for word in words)


def test_every_translations_emphasis_closes(every_catalogue):
    found = {page: broken_emphasis(catalogue) for page, catalogue in every_catalogue.items()}
    found = {page: problems for page, problems in found.items() if problems}
    assert not found, f"translations whose bold or italic would show its asterisks: {found}"


def test_the_checks_see_what_a_translation_loses():
    english = ("Scores are $QK^T/\\sqrt{d_k}$ from `attention()` as in {cite:t}`vaswani2017`, "
               "see [the mask](03_2_attention.ipynb) and {ref}`the figure <fig-mask>`.")
    kept = ("分数是 $QK^T/\\sqrt{d_k}$，来自 `attention()`，见 {cite:t}`vaswani2017`、"
            "[掩码](03_2_attention.ipynb) 与 {ref}`图 <fig-mask>`。")
    assert not catalogues.fixed_parts(english) - catalogues.fixed_parts(kept)
    for broken in (kept.replace("\\sqrt{d_k}", "\\sqrt{d}"), kept.replace("`attention()`", "attention()"),
                   kept.replace("03_2_attention.ipynb", "03_2.ipynb"), kept.replace("<fig-mask>", "<图>"),
                   kept.replace("vaswani2017", "vaswani")):
        assert catalogues.fixed_parts(english) - catalogues.fixed_parts(broken), broken
    terms = [(["beam search"], "束搜索"), (["warm-up", "warmup"], "预热")]
    assert catalogues.terms_missing("Beam searches and the warmup", "束搜索与预热", terms) == []
    assert catalogues.terms_missing("the warm up steps", "热身步", terms) == ["warm-up"]
    assert catalogues.terms_missing("`beam_search(...)` runs", "运行", terms) == []  # code is no prose
    assert catalogues.stray_emphasis("**标题。**正文") == 2 and catalogues.stray_emphasis("**标题**。正文") == 0
    assert catalogues.stray_emphasis("`a**b` and $x^*$ *ok*") == 0
    # an output's numbers come back where its translation puts them, each one
    assert not catalogues.fixed_parts("{0} of {1} kept") - catalogues.fixed_parts("保留 {1} 中的 {0}")
    assert catalogues.fixed_parts("{0} of {1} kept") - catalogues.fixed_parts("保留 {1} 中的若干")


def test_an_outputs_words_are_translated_and_its_numbers_kept():
    """_ext/outputs.py: a line's numbers stand as {0}, {1}... in its message, so a re-run that changes
    them keeps the translation; names with digits (F1, wsj_0001, x2), commands, reprs and dicts are
    no messages of their own (a printed value that opens a line, or ends it after its label, is one
    slot of the label's); a line without a translation stays as it is."""
    sys.path.insert(0, str(REPO / "_ext"))
    from outputs import template, translated, worth_translating
    assert template("test F1 37.68 on 2,416 sentences (-0.5, 1e-05)") == (
        "test F1 {0} on {1} sentences ({2}, {3})", ["37.68", "2,416", "-0.5", "1e-05"])
    assert template("wsj_0001 x2 d_model=512") == ("wsj_0001 x2 d_model={0}", ["512"])
    assert worth_translating("dev F1 {0}".replace("{0}", "3")) and worth_translating("silver trees")
    for no in ("python scripts/parsing.py --silver 8500", "results/parsing/results.json", "{4: 0.25}",
               "<Figure size 640x480 with 1 Axes>", "A1 C3", "0.25"):
        assert not worth_translating(no), no
    catalogue = {"test F1 {0} on {1} sentences": "{1} 个句子上的测试 F1 为 {0}"}
    assert translated("  test F1 37.68 on 245 sentences\nresults/x.json", catalogue) == (
        "  245 个句子上的测试 F1 为 37.68\nresults/x.json")
    assert translated("test F1 37.68 on 245 trees", catalogue) == "test F1 37.68 on 245 trees"
    # a printed value after a label is one slot, however many words its strings hold
    line = "chain, by n (k = 3): {4: 2, 'path: dilated': 3}"
    assert template(line) == ("chain, by n (k = {0}): {1}", ["3", "{4: 2, 'path: dilated': 3}"])
    assert translated(line, {"chain, by n (k = {0}): {1}": "链长，按 n（k = {0}）：{1}"}) == (
        "链长，按 n（k = 3）：{4: 2, 'path: dilated': 3}")
    # so is one that opens a line before -> or a colon
    error = "{'h': 8} -> ValueError: d_model=500 is not divisible by h=8"
    assert template(error) == ("{0} -> ValueError: d_model={1} is not divisible by h={2}",
                               ["{'h': 8}", "500", "8"])
    # and one inside a parenthesis that closes the line, or a command that opens a provenance line
    assert template("corpus: 28998 pairs (dropped {'empty': 0})") == (
        "corpus: {0} pairs (dropped {1})", ["28998", "{'empty': 0}"])
    provenance = "python scripts/x.py --set a=1 at commit 0c9e41bf73, 2 threads"
    assert template(provenance) == ("{0} at commit 0c9e41bf73, {1} threads",
                                    ["python scripts/x.py --set a=1", "2"])
    assert translated(provenance, {"{0} at commit 0c9e41bf73, {1} threads":
                                   "{0}，提交 0c9e41bf73，{1} 个线程"}) == (
        "python scripts/x.py --set a=1，提交 0c9e41bf73，2 个线程")
    # a value that is not the whole rest of the line leaves the line as it is
    assert translated("beam: {'ok': 1} ; greedy: {'ok': 1}", {"beam: {0}": "束"}) == (
        "beam: {'ok': 1} ; greedy: {'ok': 1}")


def test_a_figures_words_are_translated_and_its_formulas_kept():
    """_ext/outputs.py: a figure keeps its words as text; its plain labels are translated whole, and a
    label with a formula keeps the formula's glyphs, its words replaced and the glyphs after them moved."""
    import io

    import matplotlib
    import matplotlib.pyplot as plt
    sys.path.insert(0, str(REPO / "_ext"))
    from outputs import figure_texts, translated_figure
    with matplotlib.rc_context({"svg.fonttype": "none"}):
        fig, ax = plt.subplots()
        ax.plot([1, 2], [3, 4], label="$\\propto n$ (slope 1)")
        ax.set(title="loss by step", xlabel="sequence length $n$", ylabel="root $\\sqrt{n}$")
        ax.legend()
        svg = io.StringIO()
        fig.savefig(svg, format="svg")
        plt.close(fig)
    english = svg.getvalue()
    assert {"loss by step", "sequence length $n$", "$\\propto n$ (slope 1)"} <= set(figure_texts(english))
    chinese = translated_figure(english, {"loss by step": "各步的损失", "sequence length $n$": "序列长度 $n$",
                                          "$\\propto n$ (slope {0})": "$\\propto n$（斜率 {0}）",
                                          "root $\\sqrt{n}$": "根 $\\sqrt{n}$"})
    assert ">各步的损失</text>" in chinese and ">序列长度 </tspan>" in chinese and ">（斜率 1）</tspan>" in chinese
    assert chinese.count("font-style: oblique") == english.count("font-style: oblique")    # the formulas' n
    assert "根" not in chinese      # the radical's bar is drawn, not written: moving the glyphs would leave it
    assert translated_figure(english, {}) == english


def test_the_outputs_are_translated_and_nothing_is_fuzzy(outputs):
    """What a results cell shows is the evidence of its page: the Chinese edition shows it in Chinese,
    from the same stored outputs."""
    done, fuzzy, count = (sum(c) for c in zip(*(coverage(catalogue) for catalogue in outputs.values())))
    assert count > 800 and done == count, f"{count - done} of {count} output messages untranslated"
    assert fuzzy == 0, f"{fuzzy} fuzzy output messages: check each against its new English and clear the flag"


def test_the_catalogues_hold_exactly_the_books_english(tmp_path, books):
    """A paragraph changed in a notebook must reach the catalogue (`make gettext`); otherwise the
    Chinese edition shows it in English while the coverage tests still pass."""
    need_book_extra()
    result = subprocess.run([sys.executable, str(REPO / "tools" / "book_zh.py"), "pot", str(tmp_path / "pot")],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    templates = {p.relative_to(tmp_path / "pot").with_suffix("").as_posix(): p
                 for p in (tmp_path / "pot").rglob("*.pot")}
    assert set(templates) == set(books), "pages and catalogues differ: run `make gettext`"
    stale = {}
    for page, template in templates.items():
        english = {m.id for m in read_po(template.open("rb")) if m.id}
        translated = {m.id for m in books[page] if m.id}
        if english != translated:
            stale[page] = {"new": sorted(english - translated)[:3], "gone": sorted(translated - english)[:3]}
    assert not stale, f"catalogues out of step with the notebooks (run `make gettext`): {stale}"
    # and the cell outputs' messages, which the build writes beside the prose's templates
    found = {p.relative_to(tmp_path / "pot-outputs").with_suffix("").as_posix(): p
             for p in (tmp_path / "pot-outputs").rglob("*.pot")}
    english = {page: {m.id for m in read_po(p.open("rb")) if m.id} for page, p in found.items()}
    kept = {page: {m.id for m in c if m.id} for page, c in catalogues.catalogues(catalogues.OUTPUT_CATALOGUES).items()}
    assert {page: ids for page, ids in english.items() if ids} == kept, "outputs and their catalogues differ: run `make gettext`"


def zh_pages(site: Path) -> list[Path]:
    return pages(site / "zh")


def test_the_chinese_edition_has_every_page_in_chinese(whole_book):
    english = {p.name for p in pages(whole_book)}
    chinese = {p.name for p in zh_pages(whole_book)}
    assert english == chinese, f"pages of one edition only: {english ^ chinese}"
    glossary_page = whole_book / "zh" / "locale" / "zh_CN" / "glossary.html"
    assert glossary_page.is_file(), "the glossary is missing from the Chinese edition"
    for page in [*zh_pages(whole_book), glossary_page]:
        text = page.read_text(encoding="utf-8")
        assert '<html lang="zh-CN"' in text, page.name
        heading = re.search(r"<h1>(.*?)<", text, re.S).group(1)
        assert CJK.search(heading), f"{page.name}: its heading is not translated: {heading!r}"


def switch_target(page: Path) -> Path:
    found = re.search(r'class="btn btn-sm edition-switch" href="([^"]+)"', page.read_text(encoding="utf-8"))
    assert found, f"{page}: no language switch"
    return (page.parent / found.group(1)).resolve()


def test_every_page_switches_to_itself_in_the_other_edition(whole_book):
    root = whole_book.resolve()
    for page in pages(whole_book):
        assert switch_target(page) == (root / "zh" / "book" / page.name), page.name
    for page in zh_pages(whole_book):
        assert switch_target(page) == (root / "book" / page.name), page.name
    # the page only the Chinese edition has goes to the English landing page
    glossary_page = root / "zh" / "locale" / "zh_CN" / "glossary.html"
    assert switch_target(glossary_page) == root / "book" / "index.html"


def test_each_landing_page_names_the_other_edition(whole_book):
    english = (whole_book / "book" / "index.html").read_text(encoding="utf-8")
    chinese = (whole_book / "zh" / "book" / "index.html").read_text(encoding="utf-8")
    assert re.search(r'class="other-edition">[^<]*<a href="../zh/book/index.html"', english)
    assert re.search(r'class="other-edition">[^<]*<a href="../../book/index.html"', chinese)
    assert 'href="../locale/zh_CN/glossary.html"' in chinese


def test_the_chinese_pages_link_only_to_pages_of_the_site(whole_book):
    chosen = [*zh_pages(whole_book), whole_book / "zh" / "locale" / "zh_CN" / "glossary.html"]
    broken = broken_links(whole_book, chosen)
    assert not broken, f"links that lead nowhere: {broken}"


def test_no_chinese_line_starts_with_the_mark_after_inline_math(whole_book):
    """Between a formula and a full-width mark the browser may break a line, which then starts with
    "，" or "）" (or ends with "（"): on the Chinese pages each such pair is one unbreakable unit."""
    sys.path.insert(0, str(REPO / "_ext"))
    from editions import CLOSING, OPENING
    math = r'<span class="math notranslate nohighlight">[^<]*</span>'
    loose, kept = {}, 0
    for page in zh_pages(whole_book):
        text = page.read_text(encoding="utf-8")
        # the article (the theme's page outline repeats the headings, without the transform)
        text = text[text.find("<article"):text.rfind("</article>")]
        kept += text.count('<span class="keep-together">')
        found = re.findall(rf'(<span class="keep-together">[{OPENING}]?)?{math}[{CLOSING}]', text)
        found += re.findall(rf'(<span class="keep-together">)?[{OPENING}]{math}', text)
        if any(not unit for unit in found):
            loose[page.name] = sum(not unit for unit in found)
    assert kept > 100 and not loose, f"math beside a full-width mark that may part at a line end: {loose}"


def test_the_chinese_edition_can_be_searched_in_chinese(whole_book, books):
    """Sphinx splits Chinese text into words only with jieba (the book extra), and the glossary's terms,
    their other renderings and the working words are its words as wholes: without them a search for
    束搜索, 集束搜索 or 随机种子 finds nothing."""
    index = (whole_book / "zh" / "searchindex.js").read_text(encoding="utf-8")
    index = json.loads(index[index.index("(") + 1:index.rindex(")")])
    words = set(index["terms"]) | set(index["titleterms"])
    used = " ".join(m.string for catalogue in books.values() for m in catalogue if m.id)
    terms = {chinese for _, chinese in glossary() if CJK.search(chinese) and " " not in chinese}
    missing = sorted(term for term in terms if term in used and term not in words)
    assert not missing, f"glossary terms the Chinese search cannot find: {missing}"
    # and every word of the search dictionary (the other renderings, the working words), which the
    # glossary page holds if no chapter does: 层规范化, 随机种子, 实验方案 (Sphinx indexes no word of
    # one character, such as 轮)
    unfound = sorted(word for word in set(catalogues.search_terms()) - words if len(word) > 1)
    assert not unfound, f"words of the search dictionary the Chinese search cannot find: {unfound}"


def test_every_link_in_the_chinese_text_has_words(whole_book):
    found = wordless_links(zh_pages(whole_book))
    assert not found, f"links with no words: {found}"


def test_no_chinese_page_names_a_path_of_the_machine_that_made_it(whole_book):
    found = {p.stem: sorted(set(MACHINE_PATH.findall(visible_text(p)))) for p in zh_pages(whole_book)}
    assert not {k: v for k, v in found.items() if v}, found


def test_every_chinese_page_fits_the_column_with_real_tables(chromium, whole_book, tmp_path):
    """Chinese text breaks lines anywhere and sets wider than Latin text: the column and the tables
    are checked again, in whatever CJK font the machine has (or the boxes drawn without one)."""
    names = [f"zh/book/{p.name}" for p in zh_pages(whole_book)] + ["zh/locale/zh_CN/glossary.html"]
    verdicts, problems = column_check(chromium, whole_book, names, tmp_path)
    assert all(v.get("column", 0) > 600 for v in verdicts), "the text column was not laid out"
    assert not problems, "what a reader would see:\n" + json.dumps(problems, indent=1, ensure_ascii=False)


def prose_text(page: Path) -> str:
    """What a reader sees on a page outside code: the visible text without code blocks and
    inline code (where `{{ name }}` may be meant as written)."""
    text = page.read_text(encoding="utf-8")
    text = re.sub(r"<(pre|code)\b.*?</\1>", " ", text, flags=re.S)
    text = re.sub(r"<(script|style)\b.*?</\1>", " ", text, flags=re.S)
    return re.sub(r"<[^>]+>", " ", text)


def test_every_finding_is_put_in_on_every_page_of_both_editions(whole_book):
    """No `{{ name }}` is left in the prose of any page of either edition, and the values are
    the findings' own, in each edition's words (transformer.findings, _ext/findings.py)."""
    from transformer import findings

    english = sorted((whole_book / "book").glob("*.html"))
    left = {p.relative_to(whole_book).as_posix() for p in [*english, *zh_pages(whole_book)]
            if "{{" in prose_text(p)}
    assert not left, f"substitutions not filled in: {sorted(left)}"
    values = {lang: findings.substitutions(REPO / "results", lang) for lang in findings.LANGUAGES}
    landing = {"en": prose_text(whole_book / "book" / "index.html"),
               "zh_CN": prose_text(whole_book / "zh" / "book" / "index.html")}
    for lang, text in landing.items():
        for name in ("paper_wmt14_pairs", "semi_silver_trees", "table3_scale"):
            assert values[lang][name] in " ".join(text.split()), (lang, name, values[lang][name])


def figure_files(page: Path) -> list[Path]:
    """The SVG files of a built page's output figures."""
    text = page.read_text(encoding="utf-8")
    return [(page.parent / src).resolve() for src in
            re.findall(r'<img[^>]*\bsrc="([^"]+\.svg)"', text[text.find('<article'):])]


def figure_words(svg: str) -> list[str]:
    return [html.unescape(words) for words in re.findall(r"<text\b[^>]*>([^<]+)</text>", svg)]


def shown_text(page: Path) -> str:
    """What a reader of the built page reads, its figures' words included, in single spaces."""
    figures = [text for figure in figure_files(page) for text in figure_words(figure.read_text(encoding="utf-8"))]
    return " ".join(" ".join([visible_text(page), *figures]).split())


def test_every_figure_on_a_chinese_page_has_chinese_words(whole_book):
    """The figures keep their words as text (svg.fonttype none), and the Chinese edition shows a copy
    with them translated: each figure with words has Chinese among them (a title, an axis, a legend),
    and the English page's figure keeps its English."""
    figures, english_only = 0, []
    for page in pages(whole_book / "zh"):
        inline = re.findall(r"<svg\b.*?</svg>", page.read_text(encoding="utf-8"), flags=re.S)
        for name, svg in [*((f.name, f.read_text(encoding="utf-8")) for f in figure_files(page)),
                          *((f"inline figure {i + 1}", s) for i, s in enumerate(inline) if "<text" in s)]:
            words = [w for w in figure_words(svg) if re.search(r"[A-Za-z]{2}", w) or CJK.search(w)]
            if words:
                figures += 1
                if not any(CJK.search(w) for w in words):
                    english_only.append(f"{page.name}: {name} {words[:3]}")
    assert figures > 40 and not english_only, english_only
    for page in pages(whole_book):
        for figure in figure_files(page):
            assert not any(CJK.search(w) for w in figure_words(figure.read_text(encoding="utf-8"))), figure


def test_the_chinese_pages_show_their_outputs_in_chinese(whole_book, outputs):
    """Each translated output message without numbers (a table's header, a verdict's words, a figure's
    label) is on its Chinese page in Chinese, from the notebooks' stored outputs, and the English page
    keeps the English."""
    shown, missing = 0, {}
    for page, catalogue in outputs.items():
        chinese, english = (shown_text(whole_book / edition / f"{page}.html") for edition in ("zh", ""))
        # (a label with a formula is drawn glyph by glyph: its words are in no one text element)
        plain = [m for m in catalogue if m.id and m.string and m.string != m.id and not set(m.id) & set("{$")]
        lost = [m.id for m in plain if " ".join(m.string.split()) not in chinese]
        shown += len(plain) - len(lost)
        assert all(" ".join(m.id.split()) in english for m in plain[:5]), page
        if lost:
            missing[page] = lost[:3]
    assert shown > 200 and sum(map(len, missing.values())) <= 0.05 * shown, f"not shown in Chinese: {missing}"


def test_the_translator_pages_form_is_chinese_without_its_script(whole_book):
    """The form's words are in the Chinese page itself (read from page.js's WORDS.zh when the book is
    built), so a reader without JavaScript, or before the script runs, reads them in Chinese."""
    sys.path.insert(0, str(REPO / "_ext"))
    from editions import page_words
    words = page_words("zh")
    page = (whole_book / "zh" / "book" / "06_1_try_the_model.html").read_text(encoding="utf-8")
    form = page[page.index('<div id="translator"'):page.index('<script src="../translator/model.js"')]
    said = dict(re.findall(r'data-say="(\w+)">([^<]*)<', form))
    assert len(said) >= 12 and all(said[key] == words[key] for key in said), said
    assert f'placeholder="{words["search_hint"]}"' in form and f'aria-label="{words["no_chart"]}"' in form
    english = (whole_book / "book" / "06_1_try_the_model.html").read_text(encoding="utf-8")
    assert 'data-say="greedy_search">Greedy search<' in english and "JavaScript, which is off" in english


def test_the_chinese_pages_outputs_show_little_english(whole_book):
    """tools/output_words.py: the English words the Chinese pages' outputs show, outside code, math,
    names and the German of translation examples, are at most 800 in the whole edition (the English
    sentences of translation examples count too)."""
    sys.path.insert(0, str(REPO / "tools"))
    from output_words import count, german_words
    if not german_words():
        pytest.skip("the corpora that tell German from English are not at hand")
    pages = count(whole_book / "zh")
    most = sorted(pages.items(), key=lambda item: -item[1][0])[:5]
    assert sum(found for found, _ in pages.values()) <= 800, f"most English: {most}"


def test_the_chinese_pages_cite_as_chinese_text_does(whole_book):
    """_ext/round_citations.py (author_year_zh): "Vaswani 等（2017）" and "（Kaiser 与 Bengio，2016）"
    on the Chinese pages, never "et al." outside code; the English pages keep "et al. (2017)"."""
    cited = {p.stem: prose_text(p) for p in zh_pages(whole_book)}
    assert not [stem for stem, text in cited.items() if re.search(r"et\s+al\.", text)]
    background = " ".join(cited["02_background"].split())
    assert re.search(r"Kalchbrenner 等，\s*2017\s*）", background), background[:300]
    english = (whole_book / "book" / "06_3_constituency_parsing.html").read_text(encoding="utf-8")
    assert "Vinyals <em>et al.</em> (" in english
