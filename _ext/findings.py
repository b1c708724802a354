"""Numbers from records, in both editions. The prose of a results page writes `{{ name }}` for each
value that a record holds; this extension fills MyST's substitutions from the book's findings
(transformer.findings, chapter 7) when the build starts, in the edition's language. A substitution
survives translation: the catalogue's entry keeps `{{ name }}`, and the Chinese page gets the value."""
from pathlib import Path

from editions import edition_of


def fill_substitutions(app, config):
    from transformer.findings import substitutions

    results = Path(app.srcdir) / "results"
    # a missing or damaged record stops the build here, naming the finding and the record
    config.myst_substitutions = {**(config.myst_substitutions or {}),
                                 **substitutions(results, edition_of(app))}


def setup(app):
    app.connect("config-inited", fill_substitutions)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
