"""Every exported cell says where its code goes: a short label, "→ transformer/NAME.py", just above the cell,
shown whether the cell's code is folded or not, so that a reader finds any module's code from the page
(and a module's opening comment names its chapter, for the way back).

A cell is exported when its first line is `#| export` (to the notebook's `#| default_exp NAME` module) or
`#| export NAME` (tools/export_package.py reads the same lines)."""
import json
import re
from pathlib import Path

from docutils import nodes

EXPORT = re.compile(r"^#\| export(?: +(\w+))?\s*$")
DEFAULT = re.compile(r"^#\| default_exp +(\w+)\s*$")
PACKAGE = "transformer"


def default_module(path: Path) -> str | None:
    """The notebook's `#| default_exp NAME`, or None."""
    for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
        if cell["cell_type"] == "code":
            match = DEFAULT.match("".join(cell["source"]).split("\n", 1)[0])
            if match:
                return match[1]
    return None


def label_exported_cells(app, doctree):
    path = Path(app.env.doc2path(app.env.docname))
    if path.suffix != ".ipynb":
        return
    default = default_module(path)
    for cell in list(doctree.findall(nodes.container)):
        if "cell" not in cell["classes"]:
            continue
        code = next(iter(cell.findall(nodes.literal_block)), None)
        match = code is not None and EXPORT.match(code.astext().split("\n", 1)[0])
        if not match:
            continue
        module = match[1] or default
        label = nodes.paragraph(classes=["export-label"])
        label += nodes.Text("→ ")
        label += nodes.literal(text=f"{PACKAGE}/{module}.py")
        # beside the cell, not in it: myst-nb folds a cell whose first child is its code
        cell.parent.insert(cell.parent.index(cell), label)


def setup(app):
    app.connect("doctree-read", label_exported_cells)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
