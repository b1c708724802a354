"""The notebooks are committed with their outputs, and those outputs are the current code's.

A notebook fails here when a code cell was not executed, when its cells were not executed once each in
order (execution counts 1..n), when it stores an error, or when its code changed after its outputs were
made (the hash that tools/execute_book.py stores no longer matches). Cells whose output nbval does not
compare must say why. The last test shows that nbval, as `make test` runs it, notices a changed number.
"""
import configparser
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "book").glob("*.ipynb"))
SANITIZE = ROOT / "tools" / "nbval_sanitize.cfg"
spec = importlib.util.spec_from_file_location("execute_book", ROOT / "tools" / "execute_book.py")
execute_book = importlib.util.module_from_spec(spec)
spec.loader.exec_module(execute_book)

# why a cell's output may legitimately differ between two runs; each ignored cell names one
REASONS = ("timing", "profile", "training", "machine", "random")


def code_cells(nb):
    return [c for c in nb.cells if c.cell_type == "code"]


def tags(cell):
    return cell.get("metadata", {}).get("tags", [])


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_outputs_are_stored_from_one_run_of_the_current_code(path):
    nb = nbformat.read(path, as_version=4)
    meta = nb.metadata.get(execute_book.META)
    assert meta, f"{path.name} has no stored outputs: run `make execute` (tools/execute_book.py)"
    assert meta["code_sha256"] == execute_book.code_hash(nb), \
        f"{path.name}: code changed after its outputs were made; run tools/execute_book.py {path.relative_to(ROOT)}"
    ran = [c for c in code_cells(nb) if execute_book.SKIP_TAG not in tags(c)]
    assert [c.execution_count for c in ran] == list(range(1, len(ran) + 1)), \
        f"{path.name}: cells were not executed once each, top to bottom, in one run"
    for cell in code_cells(nb):
        if execute_book.SKIP_TAG in tags(cell):
            assert cell.execution_count is None and not cell.outputs
        assert not [o for o in cell.outputs if o.output_type == "error"], f"{path.name} stores an error"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_every_uncompared_cell_says_why(path):
    nb = nbformat.read(path, as_version=4)
    for i, cell in enumerate(code_cells(nb)):
        ignored = "nbval-ignore-output" in tags(cell) or "NBVAL_IGNORE_OUTPUT" in cell.source
        reason = cell.get("metadata", {}).get("output_varies")
        if ignored:
            assert reason and reason.split(":")[0] in REASONS, \
                f"{path.name}, code cell {i}: ignored by nbval without a reason (metadata output_varies)"
        else:
            assert reason is None, f"{path.name}, code cell {i}: has a reason but is compared"


def test_make_test_compares_outputs_and_most_cells_are_compared():
    makefile = (ROOT / "Makefile").read_text()
    assert "--nbval --nbval-sanitize-with tools/nbval_sanitize.cfg" in makefile and "--nbval-lax" not in makefile
    with_output = ignored = 0
    for path in NOTEBOOKS:
        for cell in code_cells(nbformat.read(path, as_version=4)):
            if cell.outputs:
                with_output += 1
                ignored += "nbval-ignore-output" in tags(cell)
    assert ignored < with_output / 2, f"only {with_output - ignored} of {with_output} cells with output are compared"


def test_make_test_compares_the_notebooks_again_on_other_cpu_kernels():
    """The second comparison runs with PyTorch's portable kernels forced (conftest.py stops a run
    whose ATEN_CPU_CAPABILITY does not take effect), and the first on the machine's own."""
    dry = subprocess.run(["make", "-n", "-o", str(ROOT / ".venv" / ".installed"), "test"], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout.splitlines()
    runs = [line for line in dry if "--nbval " in line]
    assert len(runs) == 2 and all(line.split()[-1] == "book" for line in runs), runs
    assert "ATEN_CPU_CAPABILITY" not in runs[0] and "ATEN_CPU_CAPABILITY=default" in runs[1]


# an absolute path of two or more parts, such as /home/me/data: it names the machine that made the output
ABSOLUTE_PATH = re.compile(r"(?<![\w.~:/-])/(?:[\w.-]+/)+[\w.-]*")


def _substitutions():
    parser = configparser.RawConfigParser()
    parser.read(SANITIZE)
    return [(re.compile(parser[s]["regex"]), parser[s]["replace"]) for s in parser.sections()]


SUBSTITUTIONS = _substitutions()


def sanitized(text):
    """The text as nbval compares it: with the sanitize file's substitutions applied."""
    for pattern, replacement in SUBSTITUTIONS:
        text = pattern.sub(replacement, text)
    return text


def output_texts(cell):
    for out in cell.outputs:
        if out.output_type == "stream":
            yield out.text
        for kind, value in out.get("data", {}).items():
            if kind.startswith("text/"):
                yield value if isinstance(value, str) else "".join(value)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_stored_outputs_name_no_path_of_the_machine_that_made_them(path):
    """A path such as the data directory differs on the machine that runs the tests, so a stored one
    fails nbval there (it did, in CI) and tells a reader nothing."""
    for i, cell in enumerate(code_cells(nbformat.read(path, as_version=4))):
        for text in output_texts(cell):
            found = ABSOLUTE_PATH.findall(sanitized(text))
            assert not found, f"{path.name}, code cell {i}: stored output names {found}"


def test_the_path_check_sees_paths_and_the_sanitize_file_covers_the_data_directory():
    assert ABSOLUTE_PATH.findall("wrote /home/me/run/speed.json") == ["/home/me/run/speed.json"]
    assert not ABSOLUTE_PATH.findall("1.5 s/step, 3/4 of tokens/s, <b>x</b>, https://a.org/b/c")
    assert not ABSOLUTE_PATH.findall(sanitized("data directory: /check/work/shared/data\n"))


def _nbval(notebook, cwd):
    env = {**os.environ, "TRANSFORMER_PROFILE": "tiny"}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbval",
                           "--nbval-sanitize-with", str(SANITIZE), str(notebook)],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def test_nbval_fails_when_a_stored_number_changes(tmp_path):
    source = ROOT / "book" / "03_3_feed_forward.ipynb"
    nb = nbformat.read(source, as_version=4)
    # a compared cell whose stored text holds a number
    target = next(c for c in code_cells(nb) if "nbval-ignore-output" not in tags(c) and any(
        o.output_type == "stream" and re.search(r"\d", o.text) for o in c.outputs))
    unchanged = tmp_path / "unchanged.ipynb"
    shutil.copy(source, unchanged)
    result = _nbval(unchanged, tmp_path)
    assert result.returncode == 0, result.stdout[-3000:]

    stream = next(o for o in target.outputs if o.output_type == "stream" and re.search(r"\d", o.text))
    stream.text = re.sub(r"\d", lambda m: str((int(m.group()) + 1) % 10), stream.text, count=1)
    changed = tmp_path / "changed.ipynb"
    nbformat.write(nb, changed)
    result = _nbval(changed, tmp_path)
    assert result.returncode != 0 and "1 failed" in result.stdout, result.stdout[-3000:]
