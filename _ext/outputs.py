"""Cell outputs in the edition's language, from the same stored outputs.

A results cell prints and tabulates its evidence in English; the Chinese edition shows the same output
with its words in Chinese and its numbers as stored. Each line of a printed output, and each piece of
text of a Markdown output (a table cell, a list item), is one message whose numbers stand as {0}, {1},
... (`template`), so a re-run that changes the numbers keeps the translation, and one that changes the
words falls back to English until the catalogue has the new words. The messages of each page live in
locale/zh_CN/outputs/<page>.po; `make gettext` extracts them (the gettext build writes one template per
page beside its own, tools/book_zh.py merges them), and the Chinese build puts the
translations in. A message without a translation, or with a fuzzy one, stays in English.

A figure is stored as SVG whose words are text (the notebooks set svg.fonttype to none), so its title,
axis labels and legend are messages too, and the Chinese edition shows a copy of the figure with them
translated, drawn by the reader's browser in the reader's fonts; no CJK font is needed to build.
"""
import ast
import html
import os
import re
from functools import cache
from pathlib import Path

from docutils import nodes
from sphinx.transforms import SphinxTransform

from editions import edition_of

# a number standing alone (not part of a name such as F1, x2, 8x8 or wsj_0001), whole (never 1 of 1.5),
# with a thousands comma inside; a ratio's x (1.95x) follows it as a unit
NUMBER = re.compile(r"(?<![\w.])[-+]?\d(?:[\d,]*\d)?(?:\.\d+)?(?:[eE][-+]?\d+)?"
                    r"(?:(?![\w.])|(?=x(?!\w))|(?=\.(?!\d)))")
SLOT = re.compile(r"\{(\d+)\}")
# the end of a label, before the value it introduces: a colon or semicolon (a full-width colon once
# translated), or an opening bracket and a word (as in "(dropped {...})"), then a bracket
LABEL_END = re.compile(r"(?:[:;]\s+|：\s*|\(\w+\s+)(?=[\[{(])")
# the end of a value that opens a line, before what follows from it: a bracket, then -> or a colon
VALUE_END = re.compile(r"[\]})](?= -> |: )")
# a word of prose: letters, lower case after the first; a path, a name with _ or a command is not prose
WORD = re.compile(r"(?<![\w/.`-])[A-Za-z][a-z]+(?![\w/`]|\.\w)")
COMMAND = re.compile(r"^\s*(\$ |python |>>> |pip |make |git )")
# a command that opens a provenance line, up to where the provenance begins (" at commit", or a comma)
LEADING_COMMAND = re.compile(r"^python [^\s,]+(?: (?!at )[^\s,]+)*(?=,| at )")
# a figure's piece of text as matplotlib writes it (a label with mathematics is split into tspans: kept)
SVG_TEXT = re.compile(r"(<text\b[^>]*>)([^<]+)(</text>)")
FOUND = {}     # the gettext build's messages, by page
OUTPUTS = Path(__file__).resolve().parent.parent / "locale" / "zh_CN" / "outputs"


def is_value(text: str) -> bool:
    """Whether the text is a printed Python container: a literal dict, list, tuple or set (not a
    number in brackets, as in "(3): ...")."""
    try:
        return isinstance(ast.literal_eval(text), (dict, list, tuple, set))
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return False


def printed_values(text: str) -> tuple[int, int, int]:
    """Where the label of a line lies between the printed values (dicts, lists, tuples) that frame it:
    (the end of a value that opens the line before "->" or ":", or of a command that opens a provenance
    line, else 0; the start of a value that ends the line after its label's colon, or inside a
    parenthesis that closes the line, else the line's length; that value's end). Values are data, each
    one slot of the label's message: "{'h': 8} -> ValueError: ...", "...by d_k: {4: 0.05, 16: 0.08}",
    "...after cleaning (dropped {'empty': 0})" and "python scripts/x.py at commit ..."."""
    command = LEADING_COMMAND.match(text)
    head = command.end() if command else next(
        (m.end() for m in VALUE_END.finditer(text) if is_value(text[:m.end()])), 0)
    for m in LABEL_END.finditer(text, head):
        value = text[m.end():]
        if m.group(0).startswith("("):
            if value.endswith(")") and is_value(value[:-1]):
                return head, m.end(), len(text) - 1
        elif is_value(value):
            return head, m.end(), len(text)
    return head, len(text), len(text)


def label_of(text: str) -> str:
    """The text without the printed values that frame it (printed_values)."""
    head, tail, end = printed_values(text)
    return text[head:tail] + text[end:]


def template(text: str) -> tuple[str, list[str]]:
    """The text with its numbers as {0}, {1}, ... and the numbers, in order; a printed value that opens
    or ends the line (printed_values) is one slot."""
    numbers = []

    def slot(match):
        numbers.append(match.group(0))
        return f"{{{len(numbers) - 1}}}"
    head, tail, end = printed_values(text)
    key = NUMBER.sub(slot, text[head:tail])
    if head:
        numbers.insert(0, text[:head])
        key = "{0}" + SLOT.sub(lambda m: f"{{{int(m.group(1)) + 1}}}", key)
    if tail < len(text):
        numbers.append(text[tail:end])
        key += f"{{{len(numbers) - 1}}}" + text[end:]
    return key, numbers


def worth_translating(text: str) -> bool:
    """A message holds prose: a word of at least two letters, no braces (a dict, or a placeholder),
    and it is neither a command line nor an object's repr."""
    return (bool(WORD.search(text)) and not set(text) & set("{}") and not COMMAND.match(text)
            and not (text.startswith("<") and text.endswith(">")))      # an object's repr


def fill(translation: str, numbers: list[str]) -> str:
    return SLOT.sub(lambda m: numbers[int(m.group(1))], translation)


def messages(text: str):
    """(leading space, message, trailing space) for each line of an output's text."""
    for line in text.split("\n"):
        core = line.strip()
        lead, trail = line[:len(line) - len(line.lstrip())], line[len(line.rstrip()):]
        yield lead, core, trail


def output_texts(doctree):
    """Every Text node of the doctree's cell outputs."""
    for output in doctree.findall(nodes.container):
        if output.get("nb_element") == "cell_code_output":
            yield from output.findall(nodes.Text)


def translated(text: str, catalogue: dict[str, str]) -> str:
    lines = []
    for lead, core, trail in messages(text):
        key, numbers = template(core)
        found = catalogue.get(key) if worth_translating(label_of(core)) else None
        lines.append(lead + (fill(found, numbers) if found else core) + trail)
    return "\n".join(lines)


def output_figures(doctree, srcdir: str):
    """(image node, its SVG file) for each SVG figure of the doctree's cell outputs."""
    for output in doctree.findall(nodes.container):
        if output.get("nb_element") == "cell_code_output":
            for image in output.findall(nodes.image):
                path = Path(srcdir) / image["uri"].lstrip("/")
                if path.suffix == ".svg" and path.is_file():
                    yield image, path


def figure_texts(svg: str) -> list[str]:
    """The words of a figure: each of its text elements and labels with mathematics, unescaped."""
    return ([html.unescape(m.group(2)) for m in SVG_TEXT.finditer(svg)]
            + [html.unescape(m.group(1)) for m in MATH_LABEL.finditer(svg)])


def translated_figure(svg: str, catalogue: dict[str, str]) -> str:
    def one(match):
        text = html.unescape(match.group(2))
        new = translated(text, catalogue)
        return match.group(0) if new == text else match.group(1) + html.escape(new, quote=False) + match.group(3)
    legends = legend_spans(svg)
    svg = MATH_LABEL.sub(lambda m: translated_math_label(m, catalogue, centred=not any(
        start <= m.start() < end for start, end in legends)), svg)
    return SVG_TEXT.sub(one, svg)


# A label with mathematics is drawn glyph by glyph, one tspan each at its own x, under a comment that holds
# the label's source. Its words before the first formula and after the last are translated (each run
# becomes one tspan, and the glyphs after it move by the change in width); the formulas stay as drawn.
MATH_LABEL = re.compile(r"<!-- ([^\n]*?\$[^\n]*?) -->(\s*<g transform=\"[^\"]*\">\s*<text>)(.*?)(</text>)", re.S)
TSPAN = re.compile(r'<tspan x="([-\d.]+)"([^>]*?style="[^"]*?font-size: ([\d.]+)px[^"]*"[^>]*)>([^<]*)</tspan>')
FORMULA = re.compile(r"\$[^$]*\$")
CJK = re.compile(r"[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]")


def width(text: str, size: float) -> float:
    """About how wide the browser draws `text` at font size `size`: a CJK character is square, the
    average Latin glyph a little over half as wide."""
    return sum(size * (1.0 if CJK.match(ch) else 0.6) for ch in text)


def legend_spans(svg: str) -> list[tuple[int, int]]:
    """Where each legend's group lies: its labels start where matplotlib put them, not centred."""
    spans = []
    for match in re.finditer(r"^( *)<g id=\"legend_\d+\">", svg, re.M):
        end = svg.find("\n" + match.group(1) + "</g>", match.end())
        spans.append((match.start(), len(svg) if end < 0 else end))
    return spans


def shifts_drawing(match) -> bool:
    """Whether the label draws more than glyphs after its words (a root's bar, a fraction's line),
    which moving the glyphs would leave behind."""
    rest = match.string[match.end():match.string.find("</g>", match.end())]
    return bool(re.search(r"<(path|rect|use|line)\b", rest))


def translated_math_label(match, catalogue: dict[str, str], centred: bool) -> str:
    label = html.unescape(match.group(1))
    new = translated(label, catalogue)
    # in the order they are drawn (matplotlib writes them font by font); spaces are no-break spaces
    glyphs = sorted((float(x), attrs, float(size), html.unescape(ch).replace("\xa0", " "))
                    for x, attrs, size, ch in TSPAN.findall(match.group(3)))
    old_runs, new_runs = FORMULA.split(label), FORMULA.split(new)
    lead, trail = len(old_runs[0]), len(old_runs[-1]) if len(old_runs) > 1 else 0
    # the translation keeps the formulas, and the glyphs are the label's, one a character of its words
    if (new == label or FORMULA.findall(new) != FORMULA.findall(label) or len(glyphs) < lead + trail
            or len(glyphs) != match.group(3).count("<tspan") or shifts_drawing(match)
            or "".join(g[3] for g in glyphs[:lead]) != old_runs[0]
            or "".join(g[3] for g in glyphs[len(glyphs) - trail:]) != (old_runs[-1] if trail else "")):
        return match.group(0)
    out, shift = [], 0.0
    if lead:
        x, attrs, size, _ = glyphs[0]
        old = glyphs[lead][0] - x if lead < len(glyphs) else width(old_runs[0], size)
        out.append((x, attrs, new_runs[0]))
        shift = width(new_runs[0], size) - old
    out += [(x + shift, attrs, ch) for x, attrs, _, ch in glyphs[lead:len(glyphs) - trail]]
    if trail:
        x, attrs, size, _ = glyphs[len(glyphs) - trail]
        out.append((x + shift, attrs, new_runs[-1]))
        shift += width(new_runs[-1], size) - width(old_runs[-1], size)
    back = shift / 2 if centred else 0.0
    spans = "".join(f'<tspan x="{x - back:.6g}"{attrs}>{html.escape(text, quote=False)}</tspan>'
                    for x, attrs, text in out if text)
    return f"<!-- {match.group(1)} -->{match.group(2)}{spans}{match.group(4)}"


@cache
def catalogue_of(path: Path, stamp: float) -> dict[str, str]:
    from babel.messages.pofile import read_po
    with path.open("rb") as f:
        return {m.id: m.string for m in read_po(f) if m.id and m.string and not m.fuzzy}


class OutputsInEditionLanguage(SphinxTransform):
    """Chinese edition: each output message replaced by its translation, numbers as stored."""

    # after Sphinx's smart quotes (750), which the gettext build's messages have been through
    default_priority = 760

    def apply(self, **kwargs):
        if edition_of(self.app) == "en":
            return
        path = OUTPUTS / f"{self.env.docname}.po"
        if not path.is_file():
            return
        # a new translation, or a new rule here, rebuilds the page
        self.env.note_dependency(str(path))
        self.env.note_dependency(__file__)
        catalogue = catalogue_of(path, path.stat().st_mtime)
        for text in list(output_texts(self.document)):
            # an HTML output is markup: only a figure drawn inline in it has words to translate
            new = (translated_figure if isinstance(text.parent, nodes.raw) else translated)(str(text), catalogue)
            if new != str(text):
                parent = text.parent
                parent.replace(text, nodes.Text(new))
                if isinstance(parent, nodes.literal_block):    # what the highlighter reads
                    parent.rawsource = translated(parent.rawsource, catalogue)
        language = self.app.config.language
        for image, path in list(output_figures(self.document, self.app.srcdir)):
            svg = path.read_text(encoding="utf-8")
            new = translated_figure(svg, catalogue)
            if new == svg:
                continue
            # beside the English figure (named by its content's hash), a copy per edition
            copy = path.with_name(f"{path.stem}.{language}.svg")
            if not copy.is_file() or copy.read_text(encoding="utf-8") != new:
                copy.write_text(new, encoding="utf-8")
            image["uri"] = "/" + os.path.relpath(copy, self.app.srcdir)


def collect(app, doctree, docname):
    """The gettext build: the page's output messages, for its template."""
    if app.builder.name != "gettext":
        return
    texts = [words for text in output_texts(doctree)
             for words in (figure_texts(str(text)) if isinstance(text.parent, nodes.raw) else [str(text)])]
    texts += [words for _, path in output_figures(doctree, app.srcdir)
              for words in figure_texts(path.read_text(encoding="utf-8"))]
    FOUND[docname] = sorted({template(core)[0] for text in texts
                             for _, core, _ in messages(text) if worth_translating(label_of(core))})


def templates_of(outdir: Path) -> Path:
    """Where the gettext build into `outdir` puts the outputs' templates: beside the prose's, not among
    them, which sphinx-intl would take for catalogues of its own."""
    return outdir.with_name(outdir.name + "-outputs")


def write_templates(app, exception):
    if exception or app.builder.name != "gettext":
        return
    from babel.messages.catalog import Catalog
    from babel.messages.pofile import write_po
    for docname, found in FOUND.items():
        catalog = Catalog(project="outputs", fuzzy=False)
        for message in found:
            catalog.add(message)
        path = templates_of(Path(app.outdir)) / f"{docname}.pot"
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("wb") as f:
            write_po(f, catalog, width=0, omit_header=True)


def figures_in_catalogues(app, config):
    """The gettext build renders a figure's SVG, and the HTML that draws one inline, too (myst-nb keeps
    only text/plain there), so that the figure's words become messages."""
    config.nb_mime_priority_overrides = [*config.nb_mime_priority_overrides, ("gettext", "image/svg+xml", 5),
                                         ("gettext", "text/html", 6)]


def setup(app):
    app.connect("config-inited", figures_in_catalogues)
    app.add_transform(OutputsInEditionLanguage)
    app.connect("doctree-resolved", collect)
    app.connect("build-finished", write_templates)
    return {"parallel_read_safe": True, "parallel_write_safe": False}
