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
