import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tools.browser import find_chromium

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def random_batch(batch, length, vocab, pad_id=0, min_len=1, generator=None):
    """Token ids [batch, length] with real tokens in [pad_id+1, vocab) and random padding at the end."""
    ids = torch.randint(pad_id + 1, vocab, (batch, length), generator=generator)
    lengths = torch.randint(min_len, length + 1, (batch,), generator=generator)
    lengths[0] = length  # at least one full row
    ids[torch.arange(length)[None, :] >= lengths[:, None]] = pad_id
    return ids, lengths


# The corpora: $TRANSFORMER_DATA if set, else the project's offline copy beside the repository
# (../shared/data), else transformer.data downloads them on first use.
_SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data"
if "TRANSFORMER_DATA" not in os.environ and _SHARED.is_dir():
    os.environ["TRANSFORMER_DATA"] = str(_SHARED)


def need_files(what, paths):
    """Skip (or fail under CI, $CI set, where the corpora must be present) unless every path is a file."""
    for path in paths:
        if not Path(path).is_file():
            message = (f"{what} is missing: no {path}; put the offline corpora at {_SHARED} or point "
                       f"$TRANSFORMER_DATA at them")
            if os.environ.get("CI"):
                pytest.fail(message)
            pytest.skip(message)


def need_corpus(name, *splits):
    """The data folder, if every file of these splits of corpus `name` is there (else see need_files)."""
    from transformer.corpora import data_dir, split_paths
    for split in splits:
        need_files(f"corpus {name!r} ({split})", [p for pair in split_paths(name, split) for p in pair])
    return data_dir()


def need_seed_folder(folder, *names):
    """DATA/folder, if it holds these files: the raw treebank sample and the English-Chinese seed corpus."""
    from transformer.corpora import data_dir
    need_files(folder, [data_dir() / folder / n for n in names])
    return data_dir() / folder


# The built book, for the tests of its pages (test_book_html, test_book_pages, test_book_zh): defined
# here, so that the session builds it once for all of them.
@pytest.fixture(scope="session")
def chromium() -> str:
    path = find_chromium()
    if path is None:
        message = "headless Chromium not found (install Debian's `chromium` package, or set CHROMIUM=...)"
        if os.environ.get("CI"):
            pytest.fail(message + "; CI must have it")
        pytest.skip(message)
    return path


def need_book_extra():
    """Skip without the book extra (pip install -e '.[book]', which make test installs); fail under CI."""
    missing = [m for m in ("yaml", "jupyter_book") if importlib.util.find_spec(m) is None]
    if missing:
        message = f"building the book needs the book extra ({', '.join(missing)} missing): pip install -e '.[book]'"
        if os.environ.get("CI"):
            pytest.fail(message + "; CI must have it")
        pytest.skip(message)


def build_book(root, *options):
    """`jupyter-book build` as `make book` runs it (warnings are errors); returns its log."""
    jb = Path(sys.executable).with_name("jupyter-book")
    command = [str(jb) if jb.exists() else "jupyter-book", "build", "-W", "-n", "--keep-going",
               *options, str(root)]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, f"book build failed:\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
    return result.stdout + result.stderr


@pytest.fixture(scope="session")
def whole_book(tmp_path_factory) -> Path:
    """What `make book` and `make book-zh` do on a reader's machine: the whole book rendered from the
    outputs stored in the notebooks, nothing executed, and no warning (-W makes one fail the build), in
    English and in Chinese (under zh/); its _build/html."""
    need_book_extra()
    out = tmp_path_factory.mktemp("whole_book")
    log = build_book(REPO, "--path-output", str(out))
    assert "Executing" not in log, "the build executed a notebook: it must render the stored outputs"
    # and, as `make book` does, the code into the site
    subprocess.run([sys.executable, str(REPO / "tools" / "site_downloads.py"), str(out / "_build" / "html")],
                   check=True, capture_output=True)
    # and, as `make book-zh` does, the Chinese edition into its zh/ (each edition links to the other)
    zh = subprocess.run([sys.executable, str(REPO / "tools" / "book_zh.py"), "html", "--site",
                         str(out / "_build" / "html")], capture_output=True, text=True, timeout=600)
    assert zh.returncode == 0, f"the Chinese edition failed to build:\n{zh.stdout[-4000:]}\n{zh.stderr[-4000:]}"
    return out / "_build" / "html"
