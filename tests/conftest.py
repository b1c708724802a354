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
