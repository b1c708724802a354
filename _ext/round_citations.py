"""Citations as "Vaswani et al. (2017)" and "(Vaswani et al., 2017)": sphinxcontrib-bibtex's
author-year style with round brackets instead of its default square ones; and the references
page labels each entry the same way, "Vaswani et al., 2017", where pybtex's plain style
numbers them."""
import dataclasses

from pybtex.plugin import register_plugin as register_pybtex_plugin
from pybtex.style.formatting.plain import Style as PlainStyle
from pybtex.style.labels import BaseLabelStyle

from sphinxcontrib.bibtex.plugin import register_plugin
from sphinxcontrib.bibtex.style.referencing import BracketStyle
from sphinxcontrib.bibtex.style.referencing.author_year import AuthorYearReferenceStyle


def round_brackets() -> BracketStyle:
    return BracketStyle(left="(", right=")")


@dataclasses.dataclass
class RoundAuthorYear(AuthorYearReferenceStyle):
    bracket_parenthetical: BracketStyle = dataclasses.field(default_factory=round_brackets)
    bracket_textual: BracketStyle = dataclasses.field(default_factory=round_brackets)
    bracket_author: BracketStyle = dataclasses.field(default_factory=round_brackets)
    bracket_label: BracketStyle = dataclasses.field(default_factory=round_brackets)
    bracket_year: BracketStyle = dataclasses.field(default_factory=round_brackets)


register_plugin("sphinxcontrib.bibtex.style.referencing", "author_year_round", RoundAuthorYear)


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

    @staticmethod
    def label(entry):
        names = [" ".join(p.last_names) for p in entry.persons.get("author", [])]
        who = (names[0] if len(names) == 1 else " and ".join(names) if len(names) == 2
               else f"{names[0]} et al.")
        return f"{who}, {entry.fields.get('year', 'n.d.')}"


class AuthorYearStyle(PlainStyle):
    default_label_style = "author_year"


register_pybtex_plugin("pybtex.style.labels", "author_year", AuthorYearLabels)
register_pybtex_plugin("pybtex.style.formatting", "author_year_plain", AuthorYearStyle)


def setup(app):
    return {"parallel_read_safe": True, "parallel_write_safe": True}
