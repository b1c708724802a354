import os
from pathlib import Path

import pytest
import torch


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
