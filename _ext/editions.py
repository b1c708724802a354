"""The book in two languages from one source: the English edition, and a Chinese one whose prose comes
from the translation catalogues in locale/ (tools/book_zh.py builds it into the English site's zh/).

Every page of either edition carries a link to the same page in the other, and each landing page says
that the other edition exists. A page that only one edition has (the Chinese glossary) links to the
other's landing page. Cell outputs and display math are kept out of the prose's catalogues
(KeptAsWritten; _ext/outputs.py gives the outputs their own), the translator page's form carries its
Chinese words in the page (FormInEditionLanguage), and the Chinese search index is built in seconds, not
a minute (SeenWords)."""
import re
from functools import cache
from pathlib import Path

from docutils import nodes
from sphinx.transforms import SphinxTransform
from sphinx.transforms.post_transforms import SphinxPostTransform

# folder: where the edition lives inside the site; switch: how a link to it reads; notice: how the
# other edition's landing page points to this one, in the other's language ({link}: the link to this
# edition, {glossary}: to the Chinese glossary); config: the Sphinx settings of the edition's build
# that the catalogues cannot translate.
EDITIONS = {
    "en": {"folder": "", "lang": "en", "switch": "English",
           "notice": "本书的英文原版：{link}。书中的术语与英文原词的对照见{glossary}。",
           "notice_link": "English edition", "config": {}},
    "zh_CN": {"folder": "zh/", "lang": "zh-CN", "switch": "中文",
              "notice": "This book also has a Chinese edition: {link}.",
              "notice_link": "中文版",
              # the book folds only cells' code (hide-input), so the fold's button names code
              "config": {"html_title": "注意力就是一切：逐节实现与讲解",
                         "nb_code_prompt_show": "显示代码", "nb_code_prompt_hide": "隐藏代码",
                         # citations as Chinese text writes them: Vaswani 等（2017）
                         "bibtex_reference_style": "author_year_zh",
                         "bibtex_default_style": "author_year_plain_zh"}},
}
GLOSSARY = "locale/zh_CN/glossary"


def edition_of(app) -> str:
    return app.config.language if app.config.language in EDITIONS else "en"


def other_page(this: str, other: str, pagename: str, root: str) -> str:
    """The relative address, from page `pagename` of edition `this`, of its counterpart in `other`."""
    up = "../" * (pagename.count("/") + EDITIONS[this]["folder"].count("/"))
    target = root if pagename.startswith("locale/") else pagename
    return up + EDITIONS[other]["folder"] + target + ".html"


def add_switch(app, pagename, templatename, context, doctree):
    this = edition_of(app)
    other = "zh_CN" if this == "en" else "en"
    href = other_page(this, other, pagename, app.config.root_doc)
    context["edition_switch"] = {"href": href, "label": EDITIONS[other]["switch"],
                                 "lang": EDITIONS[other]["lang"]}
    if pagename == app.config.root_doc and "body" in context:
        words = EDITIONS[other]
        link = f'<a href="{href}" hreflang="{words["lang"]}">{words["notice_link"]}</a>'
        glossary = f'<a href="{"../" * pagename.count("/")}{GLOSSARY}.html">术语表</a>'
        notice = words["notice"].format(link=link, glossary=glossary)
        # under the page's first heading, where a reader looks first
        head, sep, rest = context["body"].partition("</h1>")
        context["body"] = f'{head}{sep}<p class="other-edition">{notice}</p>{rest}'


class KeptAsWritten(SphinxTransform):
    """What the prose's catalogues leave out: a cell's output is what its code printed, whole (a re-run
    would make a translation of the whole stale: _ext/outputs.py translates its words with the numbers
    left open), and display math has no words.
    Sphinx would also hand a translated math block back to the parser in reST syntax, which MyST
    renders as a stray "::" and a code block."""

    default_priority = 5  # before Sphinx translates (20) and before the gettext builder extracts

    def apply(self, **kwargs):
        for node in self.document.findall(nodes.math_block):
            node["translatable"] = False
        for output in self.document.findall(nodes.container):
            if output.get("nb_element") == "cell_code_output":
                # blocks only: inline nodes are never extracted, and an inline node that carries
                # the attribute at all is taken for a translation's placeholder and emptied
                for node in output.findall(nodes.TextElement):
                    if not isinstance(node, nodes.Inline):
                        node["translatable"] = False


# full-width marks that close or open a phrase: a line of Chinese never starts with the first kind or
# ends with the second
CLOSING, OPENING = "，。、；：？！）》」』”’", "（《「『“‘"


class MathKeptWithPunctuation(SphinxPostTransform):
    """Chinese edition: inline math and a full-width mark that touches it form one unbreakable unit
    (the class keep-together, book.css). Between a formula and a CJK mark the browser may break a line,
    so a line started with "，" or "）", or ended with "（", beside the math."""

    default_priority = 900

    def run(self, **kwargs):
        if self.config.language != "zh_CN":
            return
        for math in list(self.document.findall(nodes.math)):
            parent = math.parent
            at = parent.index(math)
            before = parent[at - 1] if at > 0 and isinstance(parent[at - 1], nodes.Text) else None
            after = parent[at + 1] if at + 1 < len(parent) and isinstance(parent[at + 1], nodes.Text) else None
            lead = before.astext()[-1:] if before is not None else ""
            trail = after.astext()[:1] if after is not None else ""
            lead, trail = (lead if lead and lead in OPENING else ""), (trail if trail and trail in CLOSING else "")
            if not lead and not trail:
                continue
            unit = nodes.inline(classes=["keep-together"])
            if lead:
                parent.replace(before, nodes.Text(before.astext()[:-1]))
                unit += nodes.Text(lead)
            parent.replace(math, unit)
            unit += math
            if trail:
                parent.replace(after, nodes.Text(after.astext()[1:]))
                unit += nodes.Text(trail)


# an element of the translator page's form whose words its script sets (data-say="KEY"), and a
# placeholder or label it sets (data-say-placeholder="KEY", data-say-label="KEY")
SAID = re.compile(r'(<(\w+)\b[^>]*\bdata-say="(\w+)"[^>]*>)([^<]*)(</\2>)')
SAID_ATTRIBUTE = re.compile(r'(placeholder|aria-label)="[^"]*"(\s+data-say-(?:placeholder|label)="(\w+)")')
PAGE_SCRIPT = Path(__file__).resolve().parent.parent / "web" / "translator" / "page.js"


@cache
def page_words(language: str) -> dict[str, str]:
    """The translator page's fixed words in `language` (zh): its script's WORDS[language] entries
    that are plain strings, read from the one place they are written."""
    script = PAGE_SCRIPT.read_text(encoding="utf-8")
    block = script[script.index(f"    {language}: {{"):]
    block = block[:block.index("\n    },")]
    return dict(re.findall(r'(\w+): "([^"\\]*)"', block))


class FormInEditionLanguage(SphinxTransform):
    """Chinese edition: the translator page's form (raw HTML) carries its Chinese words in the page
    itself, as its script would set them, so a reader without JavaScript reads them too."""

    default_priority = 6

    def apply(self, **kwargs):
        if self.config.language != "zh_CN":
            return
        for raw in list(self.document.findall(nodes.raw)):
            text = raw.astext()
            if "data-say" not in text or raw.get("format") != "html":
                continue
            words = page_words("zh")
            text = SAID.sub(lambda m: m[1] + words.get(m[3], m[4]) + m[5], text)
            text = SAID_ATTRIBUTE.sub(lambda m: f'{m[1]}="{words.get(m[3], "")}"{m[2]}', text)
            raw.parent.replace(raw, nodes.raw("", text, format="html"))


class SeenWords(list):
    """A list that answers `in` from a set. Sphinx's Chinese search keeps every Latin word it has split
    in a list and looks up each word it stems in that list: quadratic, half a minute of each build."""

    def __init__(self):
        super().__init__()
        self.seen = set()

    def extend(self, words):
        words = list(words)
        super().extend(words)
        self.seen.update(words)

    def __contains__(self, word):
        return word in self.seen


def use_switch_template(app, config):
    config.templates_path.append(str(Path(__file__).parent / "templates"))
    options = config.html_theme_options
    options["article_header_end"] = ["edition-switch.html", "article-header-buttons.html"]


def setup(app):
    from sphinx.search import zh

    zh.SearchChinese.latin_terms = SeenWords()  # a class attribute, shared by every instance
    app.add_transform(KeptAsWritten)
    app.add_transform(FormInEditionLanguage)
    app.add_post_transform(MathKeptWithPunctuation)
    app.connect("config-inited", use_switch_template)
    app.connect("html-page-context", add_switch)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
