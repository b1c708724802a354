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


# One idea per exported cell: about 60 lines at most, whether the cell is open or folded, so that
# a module reads in short pieces with a sentence before each (the few a little over 60 are single
# functions that read best whole).
CELL_LINES = 66


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_exported_cells_are_short_and_follow_a_sentence(path):
    nb = nbformat.read(path, as_version=4)
    exported = [i for i, cell in enumerate(nb.cells) if cell.cell_type == "code"
                and cell.source.startswith("#| export")]
    long = [(i, len(nb.cells[i].source.splitlines())) for i in exported
            if len(nb.cells[i].source.splitlines()) > CELL_LINES]
    assert not long, f"{path.name}: exported cells over {CELL_LINES} lines (cell, lines): {long}"
    # the module's header cell (its docstring and imports) may follow other code, and so may
    # the two lines that run a module as a command
    unled = [i for i in exported[1:] if nb.cells[i - 1].cell_type != "markdown"
             and "if __name__ == \"__main__\":" not in nb.cells[i].source]
    assert not unled, f"{path.name}: exported cells with no prose right before them: {unled}"


# Chapter 7 reads every record the book holds; its cells, exported or not, come in pieces of at most
# 60 lines, each under the sentence it serves, as the rest of the book's do.
def test_chapter_7_reads_its_records_in_short_cells():
    nb = nbformat.read(ROOT / "book" / "07_conclusion.ipynb", as_version=4)
    long = [(i, len(cell.source.splitlines())) for i, cell in enumerate(nb.cells)
            if cell.cell_type == "code" and len(cell.source.splitlines()) > 60]
    assert not long, f"chapter 7's cells over 60 lines (cell, lines): {long}"
