"""Citations as "Vaswani et al. (2017)" and "(Vaswani et al., 2017)": sphinxcontrib-bibtex's
author-year style with round brackets instead of its default square ones; and the references
page labels each entry the same way, "Vaswani et al., 2017", where pybtex's plain style
numbers them. The Chinese edition cites as Chinese text does: "Vaswani 等（2017）" and
"（Vaswani 等，2017）", with full-width brackets and 等 for et al. (author_year_zh)."""
import dataclasses

from pybtex.plugin import register_plugin as register_pybtex_plugin
from pybtex.style.formatting.plain import Style as PlainStyle
from pybtex.style.labels import BaseLabelStyle

from sphinxcontrib.bibtex.plugin import register_plugin
from sphinxcontrib.bibtex.style.referencing import BracketStyle, PersonStyle
from sphinxcontrib.bibtex.style.referencing.author_year import AuthorYearReferenceStyle


def round_brackets() -> BracketStyle:
    return BracketStyle(left="(", right=")")


def full_width_brackets() -> BracketStyle:
    return BracketStyle(left="（", right="）", sep="；")


@dataclasses.dataclass
class RoundAuthorYear(AuthorYearReferenceStyle):
    """Every kind of citation (parenthetical, textual, author, label, year) in `brackets`."""
    brackets = staticmethod(round_brackets)

    def __post_init__(self):
        for kind in ("parenthetical", "textual", "author", "label", "year"):
            setattr(self, f"bracket_{kind}", self.brackets())
        super().__post_init__()


register_plugin("sphinxcontrib.bibtex.style.referencing", "author_year_round", RoundAuthorYear)


def chinese_names() -> PersonStyle:
    return PersonStyle(sep="、", sep2=" 与 ", last_sep=" 与 ", other=" 等")


@dataclasses.dataclass
class ChineseAuthorYear(RoundAuthorYear):
    brackets = staticmethod(full_width_brackets)
    person: PersonStyle = dataclasses.field(default_factory=chinese_names)
    author_year_sep: str = "，"
    # the full-width bracket brings its own space: "Vaswani 等（2017）"
    text_reference_sep: str = ""
    post_text_sep: str = "，"


register_plugin("sphinxcontrib.bibtex.style.referencing", "author_year_zh", ChineseAuthorYear)


class AuthorYearLabels(BaseLabelStyle):
    """"Vaswani et al., 2017", "Press and Wolf, 2017", "Britz, 2017"; a letter after the year
    where two entries would share a label."""

    def format_labels(self, sorted_entries):
        labels = [self.label(entry) for entry in sorted_entries]
        for label in labels:
            same = [i for i, other in enumerate(labels) if other == label]
            if len(same) > 1:
                for letter, i in zip("abcdefghijklmnopqrstuvwxyz", same):
                    labels[i] = label + letter
        return labels

    # how the label joins two authors, names more than two, and comes to the year
    two, many, year = " and ", " et al.", ", "

    def label(self, entry):
        names = [" ".join(p.last_names) for p in entry.persons.get("author", [])]
        who = (names[0] if len(names) == 1 else self.two.join(names) if len(names) == 2
               else names[0] + self.many)
        return f"{who}{self.year}{entry.fields.get('year', 'n.d.')}"


class ChineseLabels(AuthorYearLabels):
    """"Vaswani 等，2017", "Press 与 Wolf，2017", as the Chinese pages cite them."""
    two, many, year = " 与 ", " 等", "，"


class AuthorYearStyle(PlainStyle):
    default_label_style = "author_year"


class ChineseAuthorYearStyle(PlainStyle):
    default_label_style = "author_year_zh"


register_pybtex_plugin("pybtex.style.labels", "author_year", AuthorYearLabels)
register_pybtex_plugin("pybtex.style.labels", "author_year_zh", ChineseLabels)
register_pybtex_plugin("pybtex.style.formatting", "author_year_plain", AuthorYearStyle)
register_pybtex_plugin("pybtex.style.formatting", "author_year_plain_zh", ChineseAuthorYearStyle)


def setup(app):
    return {"parallel_read_safe": True, "parallel_write_safe": True}
