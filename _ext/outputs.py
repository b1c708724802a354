"""Cell outputs in the edition's language, from the same stored outputs.

A results cell prints and tabulates its evidence in English; the Chinese edition shows the same output
with its words in Chinese and its numbers as stored. Each line of a printed output, and each piece of
text of a Markdown output (a table cell, a list item), is one message whose numbers stand as {0}, {1},
... (`template`), so a re-run that changes the numbers keeps the translation, and one that changes the
words falls back to English until the catalogue has the new words. The messages of each page live in
locale/zh_CN/outputs/<page>.po; `make gettext` extracts them (the gettext build writes one template per
page beside its own, tools/book_zh.py merges them), and the Chinese build puts the
translations in. A message without a translation, or with a fuzzy one, stays in English.
"""
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
# a word of prose: letters, lower case after the first; a path, a name with _ or a command is not prose
WORD = re.compile(r"(?<![\w/.`-])[A-Za-z][a-z]+(?![\w/`]|\.\w)")
COMMAND = re.compile(r"^\s*(\$ |python |>>> |pip |make |git )")
FOUND = {}     # the gettext build's messages, by page
OUTPUTS = Path(__file__).resolve().parent.parent / "locale" / "zh_CN" / "outputs"


def template(text: str) -> tuple[str, list[str]]:
    """The text with its numbers as {0}, {1}, ... and the numbers, in order."""
    numbers = []

    def slot(match):
        numbers.append(match.group(0))
        return f"{{{len(numbers) - 1}}}"
    return NUMBER.sub(slot, text), numbers


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
        found = catalogue.get(key) if worth_translating(core) else None
        lines.append(lead + (fill(found, numbers) if found else core) + trail)
    return "\n".join(lines)


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
            new = translated(str(text), catalogue)
            if new != str(text):
                parent = text.parent
                parent.replace(text, nodes.Text(new))
                if isinstance(parent, nodes.literal_block):    # what the highlighter reads
                    parent.rawsource = translated(parent.rawsource, catalogue)


def collect(app, doctree, docname):
    """The gettext build: the page's output messages, for its template."""
    if app.builder.name != "gettext":
        return
    FOUND[docname] = sorted({template(core)[0] for text in output_texts(doctree)
                             for _, core, _ in messages(str(text)) if worth_translating(core)})


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


def setup(app):
    app.add_transform(OutputsInEditionLanguage)
    app.connect("doctree-resolved", collect)
    app.connect("build-finished", write_templates)
    return {"parallel_read_safe": True, "parallel_write_safe": False}
