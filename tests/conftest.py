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


def need_corpus(name, *splits):
    """The data folder, if every file of these splits of corpus `name` is there. Otherwise the test skips
    with the missing file's name, or fails under CI ($CI set), where the corpora must be present."""
    from transformer.corpora import data_dir, split_paths
    for split in splits:
        for path in (p for pair in split_paths(name, split) for p in pair):
            if not path.is_file():
                message = (f"corpus {name!r} ({split}) is missing: no {path}; put the offline corpora at "
                           f"{_SHARED} or point $TRANSFORMER_DATA at them")
                if os.environ.get("CI"):
                    pytest.fail(message)
                pytest.skip(message)
    return data_dir()
