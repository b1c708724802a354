"""Execute the book's notebooks top to bottom and store their outputs in the notebooks.

    python tools/execute_book.py               # every notebook (make execute)
    python tools/execute_book.py --stale       # only notebooks whose code changed since their outputs were made
    python tools/execute_book.py book/03_2_attention.ipynb ...

The book is built from the stored outputs (`execute_notebooks: 'off'` in _config.yml), so a reader's
build takes minutes on any machine. Each executed notebook records, in its metadata under
"transformer_book", a hash of its code cells together with when, where and with which profile its
outputs were made; tests/test_stored_outputs.py fails when a notebook's outputs are stale (its code
changed after they were made), missing, or not from one run in order.

The notebooks run with the profile each page names (no TRANSFORMER_PROFILE in the environment):
the test suite runs the same notebooks with the `tiny` profile instead and compares the outputs that do
not depend on it.
"""
import argparse
import hashlib
import json
import os
import platform
import sys
import time
from pathlib import Path

import nbformat
import torch
from nbclient import NotebookClient

from transformer.machine import cpu_name

ROOT = Path(__file__).resolve().parent.parent
BOOK = ROOT / "book"
META = "transformer_book"
SKIP_TAG = "skip-execution"


def code_hash(nb):
    """sha256 of what decides a notebook's outputs: each code cell's source and whether it runs."""
    digest = hashlib.sha256()
    for cell in nb.cells:
        if cell.cell_type == "code":
            skipped = SKIP_TAG in cell.get("metadata", {}).get("tags", [])
            digest.update(json.dumps([cell.source, skipped]).encode())
    return digest.hexdigest()


def is_stale(path):
    nb = nbformat.read(path, as_version=4)
    return nb.metadata.get(META, {}).get("code_sha256") != code_hash(nb)


def execute(path, timeout):
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:          # no output of an earlier run may survive into this one
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    env_profile = os.environ.pop("TRANSFORMER_PROFILE", None)
    started = time.time()
    try:
        NotebookClient(nb, timeout=timeout, kernel_name="python3", skip_cells_with_tag=SKIP_TAG,
                       resources={"metadata": {"path": str(path.parent)}}).execute()
    finally:
        if env_profile is not None:
            os.environ["TRANSFORMER_PROFILE"] = env_profile
    nb.metadata[META] = {
        "code_sha256": code_hash(nb),
        "executed": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "seconds": round(time.time() - started, 1),
        "machine": f"{cpu_name()}, {os.cpu_count()} cores, no GPU",
        # the kernels PyTorch chose; stored outputs must not depend on them (make test checks two)
        "cpu_kernels": torch.backends.cpu.get_cpu_capability(),
        "python": platform.python_version(),
    }
    nbformat.write(nb, path)
    return nb.metadata[META]["seconds"]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("notebooks", nargs="*", type=Path, help="default: every notebook in book/")
    parser.add_argument("--stale", action="store_true", help="only notebooks whose stored outputs are stale")
    parser.add_argument("--timeout", type=int, default=900, help="seconds allowed per cell")
    args = parser.parse_args()
    paths = [p.resolve() for p in args.notebooks] or sorted(BOOK.glob("*.ipynb"))
    if args.stale:
        paths = [p for p in paths if is_stale(p)]
    for i, path in enumerate(paths, 1):
        print(f"[{i}/{len(paths)}] {path.relative_to(ROOT)} ...", end=" ", flush=True)
        seconds = execute(path, args.timeout)
        print(f"{seconds:.0f} s", flush=True)
    if not paths:
        print("every notebook's stored outputs match its code")


if __name__ == "__main__":
    sys.exit(main())
