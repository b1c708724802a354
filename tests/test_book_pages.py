"""The book as a reader sees it: every page of the HTML that `make book` builds from the stored outputs.

Machine checks of the notebooks (nbval, stored outputs) say nothing about the page. These tests build
the whole book once, as `make book` does, and check what a reader would notice:

* a Markdown table printed by a cell must render as a table, not as a paragraph of pipes;
* no line of code or output, table or figure may be wider than the text column (clipped or
  scrolled sideways); printed output wraps at the column (the book's CSS), except a row of a text
  table, which must be printed as a real table instead;
* the text in a figure must be readable at the size the page shows it (about 9 px or more): figures
  are SVG, whose texts keep their sizes, so the size can be measured, not guessed;
* no page's first screen (1400 x 900) shows code: it opens with prose, figures and folded cells;
* every exported cell says which module of the package it goes to;
* no page may name a path of the machine that made it;
* the landing page shows the headline results, read from the results records, and links to the
  paper and to the repository.

The geometric checks run in headless Chromium (the page laid out at a 1400 px wide window, as a reader
on a laptop sees it); the others read the HTML. Needs the book extra and Debian's ``chromium``; without
them the tests are skipped, except under CI, where that is a failure.
"""
from __future__ import annotations

import html
import json
import os
import re
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from tests.conftest import REPO
from transformer.paper import MULTI30K_ANCHOR

MIN_TEXT_PX = 9
WINDOW = (1400, 1000)
FIRST_SCREEN = 900       # px of a laptop's first screen at 1400 x 900, under the page's top
RESULTS = REPO / "results"

# Runs in a wrapper page on the same origin: loads every page in turn in an iframe of the window's
# size, waits for MathJax and the images, and measures. Every wait has a deadline.
WRAPPER = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>page check</title>
<style>body{margin:0} iframe{border:0;width:%(width)dpx;height:%(height)dpx}</style></head>
<body><iframe id="page"></iframe><pre id="verdict">pending</pre>
<script>
const PAGES = %(pages)s, MIN_PX = %(min_px)d, FIRST_SCREEN = %(first_screen)d;
const sleep = ms => new Promise(r => setTimeout(r, ms));
async function until(cond, ms) {
  const end = Date.now() + ms;
  while (!cond() && Date.now() < end) await sleep(50);
  return cond();
}
function withDeadline(p, ms) { return Promise.race([p.then(() => true), sleep(ms).then(() => false)]); }
function textSizes(svg) {
  // Sizes, in the SVG's own units, of its texts. Text drawn as paths (matplotlib's
  // svg.fonttype 'path') is a group of glyphs scaled by size / 100, one group per text: its
  // largest scale is the text's size (sub- and superscripts are smaller on purpose). Text kept as
  // <text> carries its size in its style.
  const sizes = [];
  for (const g of svg.querySelectorAll('g[id^="text"]')) {
    const scales = Array.from(g.querySelectorAll('[transform*="scale("]'))
      .map(e => e.getAttribute('transform').match(/scale\\(([0-9.]+)/))
      .filter(m => m).map(m => 100 * parseFloat(m[1]));
    if (scales.length) sizes.push(Math.max(...scales));
  }
  for (const t of svg.querySelectorAll('text')) {
    const m = (t.getAttribute('style') || '').match(/font(?:-size)?:[^;]*?([0-9.]+)px/);
    if (m) sizes.push(parseFloat(m[1]));
  }
  return sizes;
}
async function measure(frame, page) {
  const target = new URL(page, location.href).href;
  frame.src = page;
  await until(() => { const d = frame.contentDocument;
    return d && d.location.href === target && d.readyState === 'complete'; }, 20000);
  const w = frame.contentWindow, d = frame.contentDocument;
  if (w.MathJax && w.MathJax.startup && w.MathJax.startup.promise)
    await withDeadline(w.MathJax.startup.promise, 15000);
  const imgs = Array.from(d.images);
  await withDeadline(Promise.all(imgs.map(i => i.complete ? null :
      new Promise(r => { i.addEventListener('load', r); i.addEventListener('error', r); }))), 10000);
  const article = d.querySelector('article.bd-article') || d.body;
  const column = article.getBoundingClientRect();
  const v = {page: page, column: Math.round(column.width), wide_output: [], wide_tables: [],
             pipe_paragraphs: [], raster_figures: [], small_text: [], wrapped_table_rows: [],
             figures: 0};
  // the first screen (a laptop's 900 px at this width) holds prose, figures and folded cells: no code
  const code = Array.from(article.querySelectorAll('div.cell_input pre'))
    .find(p => !p.closest('details:not([open])'));
  const codeTop = code ? code.getBoundingClientRect().top + w.scrollY : null;
  if (codeTop !== null && codeTop < FIRST_SCREEN) v.code_on_first_screen = [Math.round(codeTop)];
  // code, outputs and code blocks that need a sideways scroll: their longest lines
  for (const pre of article.querySelectorAll('pre')) {
    if (pre.scrollWidth > pre.clientWidth + 1) {
      const longest = pre.textContent.split('\\n').sort((a, b) => b.length - a.length)[0];
      v.wide_output.push(longest.slice(0, 120));
    }
  }
  // printed output wraps at the column; a wrapped line that is a row of a text table (columns
  // lined up by runs of spaces) becomes unreadable, so those must be printed as real tables
  for (const pre of article.querySelectorAll('div.cell_output pre')) {
    const probe = d.createElement('span');
    probe.textContent = 'x'.repeat(100);
    pre.appendChild(probe);
    const fits = Math.floor(pre.clientWidth / (probe.getBoundingClientRect().width / 100));
    pre.removeChild(probe);
    for (const line of pre.textContent.split('\\n'))
      if (line.length > fits && /\\S {3,}\\S/.test(line.trim()))
        v.wrapped_table_rows.push(line.slice(0, 120));
  }
  for (const t of article.querySelectorAll('table')) {
    const r = t.getBoundingClientRect();
    if (r.right > column.right + 1)
      v.wide_tables.push(t.textContent.trim().replace(/\\s+/g, ' ').slice(0, 80));
  }
  for (const p of article.querySelectorAll('p')) {
    const text = p.textContent;
    if (/\\|\\s*:?-{3,}/.test(text) || (text.match(/ \\| /g) || []).length >= 3)
      v.pipe_paragraphs.push(text.trim().slice(0, 100));
  }
  // figures drawn inline (SVG in the page, so that their links work), measured the same way
  for (const svg of article.querySelectorAll('div.cell_output svg')) {
    if (!svg.getAttribute('viewBox')) continue;
    v.figures += 1;
    const scale = svg.getBoundingClientRect().width / Number(svg.getAttribute('viewBox').split(/[ ,]+/)[2]);
    const sizes = textSizes(svg);
    if (sizes.length && Math.min(...sizes) * scale < MIN_PX)
      v.small_text.push(`inline figure: ${(Math.min(...sizes) * scale).toFixed(1)} px`);
    if (svg.getBoundingClientRect().right > column.right + 1) v.wide_tables.push('inline figure');
  }
  for (const img of article.querySelectorAll('div.cell_output img')) {
    v.figures += 1;
    const src = img.getAttribute('src');
    const shown = img.getBoundingClientRect().width;
    if (img.getBoundingClientRect().right > column.right + 1)
      v.wide_tables.push('figure ' + src);
    if (!/\\.svg$/.test(src)) { v.raster_figures.push(src); continue; }
    const svg = new DOMParser().parseFromString(await (await fetch(img.src)).text(), 'image/svg+xml');
    const root = svg.documentElement;
    const box = (root.getAttribute('viewBox') || '').split(/[ ,]+/).map(Number);
    const scale = shown / (box.length === 4 ? box[2] : parseFloat(root.getAttribute('width')));
    const sizes = textSizes(root);
    if (!sizes.length) continue;
    const smallest = Math.min(...sizes) * scale;
    if (smallest < MIN_PX) v.small_text.push(`${src}: ${smallest.toFixed(1)} px`);
  }
  return v;
}
(async () => {
  const frame = document.getElementById('page');
  const out = [];
  for (const page of PAGES) {
    try { out.push(await measure(frame, page)); }
    catch (e) { out.push({page: page, error: String(e && e.stack || e)}); }
  }
  document.getElementById('verdict').textContent = JSON.stringify(out);
})();
</script></body></html>
"""


def pages(html_root: Path) -> list[Path]:
    return sorted((html_root / "book").glob("*.html"))


def visible_text(page: Path) -> str:
    """The page's text as a reader sees it (scripts, styles and tags removed)."""
    text = page.read_text(encoding="utf-8")
    text = re.sub(r"<(script|style)\b.*?</\1>", " ", text, flags=re.S)
    return html.unescape(re.sub(r"<[^>]+>", " ", text))


# absolute paths of the kind a machine prints: /tmp/..., /home/..., a data folder, a venv
MACHINE_PATH = re.compile(r"(?<![\w.:/-])/(?:tmp|home|root|work|Users|var|opt|mnt|private|srv)/[\w./-]+")


def test_no_page_names_a_path_of_the_machine_that_made_it(whole_book):
    found = {p.stem: sorted(set(MACHINE_PATH.findall(visible_text(p)))) for p in pages(whole_book)}
    found = {k: v for k, v in found.items() if v}
    assert not found, f"machine paths on the pages: {found}"


# how the book was made is not what it is about: words that only make sense of its making
MAKING_OF = re.compile(r"\b(this session|earlier session|as this book first|first wrote it|the notes of|"
                       r"a pilot whose logs|sittings|(?:this|that|one|a later|an earlier) sitting|as it then was|"
                       r"now keeps)\b", re.I)


def test_no_page_speaks_of_how_the_book_was_made(whole_book):
    found = {p.stem: sorted(set(MAKING_OF.findall(visible_text(p)))) for p in pages(whole_book)}
    found = {k: v for k, v in found.items() if v}
    assert not found, f"words about the book's making: {found}"


# words that date a sentence: true the day it was written, wrong once the work has moved on
DATING = re.compile(r"\b(today's|now holds|once it is|records so far|fare so far|for now|currently|"
                    r"at present|at the time of writing|as of now|not published at a public address yet)\b",
                    re.I)


def test_no_page_dates_itself(whole_book):
    """Unless the page says that a record is still in progress, its sentences hold whenever they are read."""
    found = {}
    for page in pages(whole_book):
        text = " ".join(visible_text(page).replace("\u2019", "'").split())
        if "in progress" not in text.lower():
            hits = sorted({m.lower() for m in DATING.findall(text)})
            if hits:
                found[page.stem] = hits
    assert not found, f"words that date the page: {found}"


def test_the_dating_check_sees_dating_words():
    assert DATING.findall("today's command; the profile now holds it; records so far: 3") == [
        "today's", "now holds", "records so far"]
    assert not DATING.findall("the best hypothesis so far; the profile holds that setting")


def test_the_path_check_sees_machine_paths():
    assert MACHINE_PATH.findall("wrote /tmp/tmpab12/run and /home/me/data") == ["/tmp/tmpab12/run",
                                                                               "/home/me/data"]
    assert not MACHINE_PATH.findall("see https://arxiv.org/abs/1706.03762 and results/vision/x.json")


def test_the_landing_page_shows_the_results_and_links_to_paper_and_repository(whole_book):
    text = " ".join(visible_text(whole_book / "book" / "index.html").split())
    page = (whole_book / "book" / "index.html").read_text(encoding="utf-8")
    m30k = json.loads((RESULTS / "multi30k-cpu" / "results.json").read_text())["test"]
    parsing = json.loads((RESULTS / "parsing" / "results.json").read_text())["test"]
    expected = [f"{m30k['sacrebleu']:.2f}", f"{parsing['f1']:.1f}", "GPU"]
    missing = [s for s in expected if s not in text]
    assert not missing, f"the landing page does not show {missing}"
    assert "arxiv.org/abs/1706.03762" in page, "no link to the paper"
    # how to get the code: a page inside the site, which a hosted copy keeps
    assert 'href="getting_the_code.html"' in page and (whole_book / "book" / "getting_the_code.html").exists()
    assert "../README.md" not in page, "a link that leaves the built site"
    # the same-test-set anchor beside the translation score, cited as the prose cites (a link to
    # its entry on the references page)
    assert f"{MULTI30K_ANCHOR['bleu_lowercased']}" in text and re.search(r"Wu et al\. ?, 2021", text)
    assert re.search(r'<a class="reference internal" href="references.html#[^"]+" title="Zhiyong Wu', page)
    # the order a reader meets: what the book is, how well it reproduced the paper, how to run
    # it, a translation and a picture, what it does not reproduce, the map and the chapters
    order = ['id="how-well-it-reproduces-the-paper"', 'id="running-the-notebooks-yourself"',
             'id="the-model-at-work"', 'id="what-this-book-does-not-reproduce"',
             'id="the-map-the-paper-s-figure-1-chapter-by-chapter"', 'id="before-you-start"']
    assert [page.index(i) for i in order] == sorted(page.index(i) for i in order)
    at_work = page[page.index(order[2]):page.index(order[3])]
    first_output = (RESULTS / "multi30k-cpu" / "translations.de").read_text(encoding="utf-8").splitlines()[0]
    assert "<table" in at_work and html.escape(first_output, quote=False) in at_work, "no translation"
    assert "<svg" in page[page.index(order[4]):page.index(order[5])], "no picture of the model"


SCREENS = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>screens</title>
<style>body{margin:0} iframe{border:0;width:%(width)dpx;height:%(height)dpx}</style></head>
<body><iframe id="page" src="book/index.html"></iframe><pre id="verdict">pending</pre>
<script>
document.getElementById("page").addEventListener("load", () => setTimeout(() => {
  const doc = document.getElementById("page").contentDocument;
  const top = el => el ? el.getBoundingClientRect().top + doc.defaultView.scrollY : null;
  const results = doc.getElementById("how-well-it-reproduces-the-paper");
  document.getElementById("verdict").textContent = JSON.stringify([{
    results_table: top(results && results.querySelector("table")),
    commands: top(doc.getElementById("running-the-notebooks-yourself")),
    screen: doc.defaultView.innerHeight}]);
}, 500));
</script></body></html>"""


def test_the_landing_page_shows_how_well_within_two_screens_and_the_commands_within_four(
        chromium, whole_book, tmp_path):
    """At 1400x900, the reproduction results start on the first two screens and the commands that
    build and test the book on the first four."""
    (whole_book / "_screens.html").write_text(SCREENS % {"width": 1400, "height": 900})
    [found] = run_in_browser(chromium, whole_book, "_screens.html", tmp_path)
    assert found["screen"] == 900 and found["results_table"] is not None, found
    assert found["results_table"] < 2 * 900 and found["commands"] < 4 * 900, found
    print(f"at 1400x900: the results table at {found['results_table']:.0f} px, "
          f"the commands at {found['commands']:.0f} px")


def test_the_landing_page_and_chapter_7_say_what_the_records_say(whole_book):
    """The two pages that sum the book up state each result and status as the records have it:
    every row of the ledger as it reads today, no sweep called unfinished once its records are
    complete (or finished while they are not), and the GPU said to have run exactly where a GPU
    record exists."""
    from transformer.conclusion import ledger
    rows = ledger(RESULTS)
    gpu_ran = (RESULTS / "gpu-check" / "results.json").exists() or any(
        (RESULTS / "gpu-check").glob("*.json"))
    for name in ("index", "07_conclusion"):
        # what the page says, not the code that says it (cell inputs left out); its typography
        # turns ' into a right quote
        page = re.sub(r'<div class="cell_input[^"]*">\s*<div class="highlight[^"]*">'
                      r'<div class="highlight"><pre>.*?</pre>', " ",
                      (whole_book / "book" / f"{name}.html").read_text(encoding="utf-8"), flags=re.S)
        page = re.sub(r"<(script|style)\b.*?</\1>", " ", page, flags=re.S)
        text = " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page)).replace("\u2019", "'").split())
        missing = [r["ours"] for r in rows if " ".join(r["ours"].split()) not in text]
        assert not missing, f"{name} does not state {missing}"
        # the page says "in progress" exactly when some record is unfinished
        unfinished = [r["result"] for r in rows if "(in progress)" in r["result"]]
        assert bool(unfinished) == ("in progress" in text.lower()), (name, unfinished)
        assert not re.search(r"records arrive as it runs|so far every finished row", text, re.I), name
        said_gpu = re.search(r"GPU code has run for minutes|ran the GPU checks|GPU checks? of|"
                             r"GPU code on one GPU for checks", text)
        assert bool(said_gpu) == gpu_ran, f"{name}: what it says of the GPU disagrees with results/gpu-check"
        assert "no GPU has run it yet" not in text


def broken_links(site: Path, chosen: list[Path]) -> list[str]:
    """The relative links of those pages that do not land on a file of the built site (a hosted copy
    has nothing else), and the anchors that name no id of their page."""
    broken = []
    for page in chosen:
        text = page.read_text(encoding="utf-8")
        for target in set(re.findall(r'href="([^"]+)"', text)):
            if re.match(r"[a-z][a-z0-9+.-]*:|//", target):
                continue                      # another site, or mailto:
            path, _, anchor = target.partition("#")
            path = path.partition("?")[0]     # a cache-busting query names the same file
            file = (page.parent / html.unescape(path)).resolve() if path else page
            if not file.is_file() or site.resolve() not in file.parents:
                broken.append(f"{page.stem}: {target}")
            elif anchor and file.suffix == ".html" and not re.search(
                    rf'id="{re.escape(html.unescape(anchor))}"', file.read_text(encoding="utf-8")):
                broken.append(f"{page.stem}: {target}")
    return sorted(broken)


def wordless_links(chosen: list[Path]) -> list[str]:
    """Links of the text (references, internal or external) that a reader cannot see: no words."""
    found = []
    for page in chosen:
        for target, inner in re.findall(r'<a class="reference [^"]*"[^>]*href="([^"]*)"[^>]*>(.*?)</a>',
                                        page.read_text(encoding="utf-8"), re.S):
            if not re.sub(r"<[^>]+>", "", inner).strip() and "<img" not in inner:
                found.append(f"{page.stem}: {target}")
    return found


def test_every_link_in_the_text_has_words(whole_book):
    found = wordless_links(pages(whole_book))
    assert not found, f"links with no words: {found}"


def test_every_link_inside_the_site_leads_to_a_page_of_it(whole_book):
    broken = broken_links(whole_book, pages(whole_book))
    assert not broken, f"links that lead nowhere: {broken}"


class OpenCode(HTMLParser):
    """The code a reader sees without opening anything: the source of every code cell whose input
    is neither folded (hide-input, hide-cell) nor removed, one string per cell."""

    def __init__(self):
        super().__init__()
        self.divs, self.cells, self.text, self.pre = [], [], None, 0

    def handle_starttag(self, tag, attrs):
        classes = (dict(attrs).get("class") or "").split()
        if tag == "div":
            self.divs.append(classes)
            if "cell_input" in classes:
                cell = next((c for c in reversed(self.divs[:-1]) if "cell" in c), [])
                folded = {"tag_hide-input", "tag_hide-cell"} & set(cell)
                self.text = None if folded else ""
        elif tag == "pre" and self.text is not None:
            self.pre += 1

    def handle_endtag(self, tag):
        if tag == "div" and self.divs:
            if "cell_input" in self.divs.pop() and self.text is not None:
                self.cells.append(self.text)
                self.text = None
        elif tag == "pre" and self.pre:
            self.pre -= 1

    def handle_data(self, data):
        if self.text is not None and self.pre:
            self.text += data


def open_code(page: Path) -> list[str]:
    parser = OpenCode()
    parser.feed(page.read_text(encoding="utf-8"))
    return parser.cells


MOST_OPEN_LINES_A_CELL, MOST_OPEN_LINES = 60, 3000


def test_open_code_comes_in_short_cells_and_little_of_it(whole_book):
    """The paper's ideas in short cells with prose between them: no cell a reader sees open is
    longer than a screen, and the machinery (exported engineering, plumbing, figures' code) is
    folded, so that the open code of the whole book stays within a budget."""
    lines = {p.stem: [len(c.strip("\n").splitlines()) for c in open_code(p)] for p in pages(whole_book)}
    long = {page: [n for n in cells if n > MOST_OPEN_LINES_A_CELL] for page, cells in lines.items()}
    assert not {k: v for k, v in long.items() if v}, f"open cells over {MOST_OPEN_LINES_A_CELL} lines: {long}"
    total = sum(map(sum, lines.values()))
    assert 0 < total <= MOST_OPEN_LINES, f"{total} lines of open code: {lines}"


def test_the_open_code_count_sees_folded_cells():
    page = ('<div class="cell docutils container"><div class="cell_input docutils container">'
            '<pre>a = 1\nb = 2</pre></div></div><div class="cell tag_hide-input docutils container">'
            '<details><div class="cell_input docutils container"><pre>hidden</pre></div></details></div>')
    parser = OpenCode()
    parser.feed(page)
    assert parser.cells == ["a = 1\nb = 2"]


def test_every_page_opens_with_prose(whole_book):
    """A chapter's first screen begins with what it is about: after the title, a paragraph, not
    a cell of imports."""
    found = {}
    for page in pages(whole_book):
        text = page.read_text(encoding="utf-8")
        start = text.index("</h1>", text.index('<article class="bd-article"'))
        after = re.search(r"<(p|div)\b[^>]*>", text[start:])
        if after is None or after.group(1) != "p":
            found[page.stem] = text[start:start + 200]
    assert not found, f"pages whose title is followed by something other than prose: {found}"


def test_every_citation_is_linked_to_its_source(whole_book):
    """Works are cited with {cite} roles from book/references.bib, each entry with a link to where
    it can be read; no chapter names a work in plain text instead."""
    bib = (REPO / "book" / "references.bib").read_text(encoding="utf-8")
    entries = re.findall(r"@\w+\{(\w+),(.*?)\n\}", bib, re.S)
    assert entries and all(re.search(r"url = \{https://", body) for _, body in entries), \
        "a bibliography entry without a link"
    references = (whole_book / "book" / "references.html").read_text(encoding="utf-8")
    urls = [re.search(r"url = \{(\S+)\}", body).group(1) for _, body in entries]
    assert all(f'href="{u}"' in references for u in urls), "the references page leaves out a link"
    plain = re.compile(r"\b[A-Z][a-z]+ (?:et al\.|and [A-Z][a-z]+),? \(?(?:19|20)\d\d")
    found = {}
    for path in sorted((REPO / "book").glob("*.ipynb")):
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            if cell["cell_type"] == "markdown":
                found.setdefault(path.stem, []).extend(plain.findall("".join(cell["source"])))
    assert not {k: v for k, v in found.items() if v}, f"works cited in plain text: {found}"


def column_check(chromium, site: Path, names: list[str], tmp_path: Path) -> tuple[list[dict], dict]:
    """Each page (its path inside the site) laid out in the browser: the verdicts and the problems."""
    (site / "_page_check.html").write_text(WRAPPER % {
        "pages": json.dumps(names), "min_px": MIN_TEXT_PX, "width": WINDOW[0], "height": WINDOW[1],
        "first_screen": FIRST_SCREEN})
    verdicts = run_in_browser(chromium, site, "_page_check.html", tmp_path)
    assert {v["page"] for v in verdicts} == set(names)
    problems = {}
    for v in verdicts:
        found = {k: v[k] for k in ("error", "wide_output", "wide_tables", "pipe_paragraphs",
                                   "raster_figures", "small_text", "wrapped_table_rows",
                                   "code_on_first_screen")
                 if v.get(k)}
        if found:
            problems[v["page"]] = found
    return verdicts, problems


def test_every_page_fits_the_column_with_readable_figures_and_real_tables(chromium, whole_book, tmp_path):
    verdicts, problems = column_check(chromium, whole_book, [f"book/{p.name}" for p in pages(whole_book)],
                                      tmp_path)
    assert sum(v.get("figures", 0) for v in verdicts) > 20, "the figures are missing"
    assert all(v.get("column", 0) > 600 for v in verdicts), "the text column was not laid out"
    assert not problems, "what a reader would see:\n" + json.dumps(problems, indent=1, ensure_ascii=False)


def test_6_2_leads_with_its_verdicts(whole_book):
    """6.2 answers its question and leaves how to its continued page: the long sweep's verdict
    table is on 6.2, the paper's table and the protocol after it, on 6.2 (continued)."""
    page = (whole_book / "book" / "06_2_model_variations.html").read_text(encoding="utf-8")
    assert "the paper’s claim</p>" in page and 'id="the-paper-s-table-3"' not in page
    evidence = (whole_book / "book" / "06_2_sweeps.html").read_text(encoding="utf-8")
    assert (evidence.index('id="the-paper-s-table-3"')
            < evidence.index('id="trained-for-a-budget-of-epochs-the-protocol"'))


def test_no_page_declares_a_script_constant_twice(whole_book):
    """A page's inline scripts share one scope: a `const` or `let` declared twice is a SyntaxError in
    the browser's console (sphinx-thebe's THEBE_JS_URL was, on every page), and it stops that script."""
    declared = re.compile(r"\b(?:const|let)\s+([A-Za-z_$][\w$]*)\s*=")
    twice = {}
    for page in pages(whole_book):
        inline = re.findall(r"<script(?![^>]*\bsrc=)[^>]*>(.*?)</script>", page.read_text(encoding="utf-8"),
                            re.S)
        names = [name for body in inline for name in declared.findall(body)]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            twice[page.stem] = repeated
    assert not twice, f"declared twice on one page: {twice}"


def run_in_browser(chromium, root: Path, wrapper: str, tmp_path: Path) -> list[dict]:
    """Serve `root` on 127.0.0.1, open the wrapper page in headless Chromium, return its verdict."""
    import functools
    import http.server
    import threading

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(root)))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        command = [
            chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
            "--disable-background-networking", "--disable-component-update", "--no-first-run",
            f"--user-data-dir={tmp_path / 'profile'}", "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
            f"--window-size={WINDOW[0] + 40},{WINDOW[1] + 200}", "--virtual-time-budget=600000",
            "--dump-dom", f"http://127.0.0.1:{httpd.server_address[1]}/{wrapper}",
        ]
        result = subprocess.run(command, capture_output=True, text=True, timeout=600)
    finally:
        httpd.shutdown()
        httpd.server_close()
    found = re.search(r'<pre id="verdict">(.*?)</pre>', result.stdout, re.S)
    assert found and found.group(1) != "pending", (
        f"no verdict from the browser (exit {result.returncode}):\n{result.stdout[-2000:]}\n{result.stderr[-2000:]}")
    return json.loads(html.unescape(found.group(1)))


# ---------------------------------------------------------------- the code, from the site --

def git_out(*args: str) -> str:
    return subprocess.run(["git", "-C", str(REPO), *args], check=True, capture_output=True,
                          text=True).stdout.strip()


def test_the_site_carries_the_repository_at_its_commit(whole_book):
    import hashlib
    import tarfile
    downloads, commit = whole_book / "downloads", git_out("rev-parse", "HEAD")
    *sums, last = (downloads / "SHA256SUMS").read_text().splitlines()
    assert last.startswith(f"# commit {commit}")
    for line in sums:
        digest, name = line.split("  ")
        assert hashlib.sha256((downloads / name).read_bytes()).hexdigest() == digest, name
    assert {line.split("  ")[1] for line in sums} == {"SHA256SUMS", "model.pt", "transformer-source.tar.gz",
                                                      "transformer-0.1.0-py3-none-any.whl"} - {"SHA256SUMS"}
    with tarfile.open(downloads / "transformer-source.tar.gz") as tar:
        members = [m for m in tar.getmembers() if not m.isdir()]
    assert {m.name.split("/", 1)[0] for m in members} == {f"transformer-{commit[:12]}"}
    assert {m.name.split("/", 1)[1] for m in members} == set(git_out("ls-tree", "-r", "--name-only",
                                                                     "HEAD").splitlines())
    # the pages link what is there
    for page in ("index", "getting_the_code"):
        text = (whole_book / "book" / f"{page}.html").read_text(encoding="utf-8")
        assert 'href="../downloads/transformer-source.tar.gz"' in text, page


def test_the_wheel_from_the_site_installs_and_translates(whole_book, tmp_path):
    """A fresh virtual environment gets the package from the site's wheel alone (its dependencies, torch
    among them, are lent from the book's environment so that nothing is downloaded) and translates with
    the site's model file, away from the repository."""
    import sys
    downloads, venv = whole_book / "downloads", tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    (site_packages,) = (venv / "lib").glob("python3*/site-packages")
    lent = [p for p in sys.path if p.endswith("site-packages")]
    (site_packages / "lent_dependencies.pth").write_text("\n".join(lent) + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps",
                    "--no-index", str(downloads / "transformer-0.1.0-py3-none-any.whl")], check=True)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    where = subprocess.run([str(python), "-c", "import transformer; print(transformer.__file__)"], cwd=tmp_path,
                           env=env, capture_output=True, text=True, check=True).stdout.strip()
    assert where.startswith(str(site_packages)), where        # the wheel's copy, not the repository's
    done = subprocess.run([str(python), "-m", "transformer.translate", str(downloads / "model.pt"), "--beam", "1"],
                          input="Two dogs play in the snow.\n", cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    from transformer.translate import Translator
    expected = Translator.from_run(REPO / "results" / "multi30k-cpu" / "model.pt", beam_size=1).translate(
        "Two dogs play in the snow.")
    assert done.stdout.strip() == expected and expected


EXPORT = re.compile(r"^#\| export(?: +(\w+))?\s*$")


def exported_modules(notebook: Path) -> list[str]:
    """The module each exported cell of a notebook goes to, in order (tools/export_package.py's rule)."""
    cells = [c for c in json.loads(notebook.read_text(encoding="utf-8"))["cells"] if c["cell_type"] == "code"]
    firsts = ["".join(c["source"]).split("\n", 1)[0] for c in cells]
    default = next((line.split()[-1] for line in firsts if line.startswith("#| default_exp ")), None)
    return [m[1] or default for line in firsts if (m := EXPORT.match(line))]


def test_every_exported_cell_names_its_module_on_the_page_in_both_editions(whole_book):
    """A reader finds any module's code from the page: above every exported cell, folded or not, the
    label "→ transformer/NAME.py" (_ext/export_labels.py), in the English and the Chinese edition."""
    label = re.compile(r'<p class="export-label">→ <code[^>]*><span class="pre">transformer/(\w+)\.py</span>')
    counted = 0
    for notebook in sorted((REPO / "book").glob("*.ipynb")):
        wanted = exported_modules(notebook)
        counted += len(wanted)
        for edition in (whole_book, whole_book / "zh"):
            page = (edition / "book" / f"{notebook.stem}.html").read_text(encoding="utf-8")
            assert label.findall(page) == wanted, f"{edition.name}/{notebook.stem}: labels do not match the exports"
    assert counted > 200, "the exported cells were not found"
