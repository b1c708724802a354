"""Citations as "Vaswani et al. (2017)" and "(Vaswani et al., 2017)": sphinxcontrib-bibtex's
author-year style with round brackets instead of its default square ones."""
import dataclasses

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


def setup(app):
    return {"parallel_read_safe": True, "parallel_write_safe": True}
