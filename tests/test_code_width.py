"""The book's code fits its text column: the rendered page shows about 88 characters of code per line,
and a longer line is cut off behind a scroll bar."""
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "book").glob("*.ipynb"))
COLUMN = 88


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_code_lines_fit_the_column(path):
    nb = nbformat.read(path, as_version=4)
    long = [(i, line) for i, cell in enumerate(nb.cells) if cell.cell_type == "code"
            for line in cell.source.splitlines() if len(line) > COLUMN]
    assert not long, f"{path.name}: {len(long)} code lines longer than {COLUMN} characters, " \
                     f"the first in cell {long[0][0]}: {long[0][1]!r}"
