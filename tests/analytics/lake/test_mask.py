"""analytics/lake/_mask.py: the erasure mask kept in the lake."""

from __future__ import annotations

import json

import pytest

from analytics.lake import Lake
from analytics.lake._files import write_bytes_atomic
from analytics.lake._mask import MASK_PATH, read_mask, write_mask


def test_a_lake_no_erasure_has_masked_masks_nobody(lake: Lake) -> None:
    assert read_mask(lake) == frozenset()


def test_the_mask_written_is_the_mask_read(lake: Lake) -> None:
    write_mask(lake, ["u2", "u1", "u2"])
    assert read_mask(lake) == frozenset({"u1", "u2"})


def test_a_mask_that_cannot_be_read_raises_rather_than_masking_nobody(lake: Lake) -> None:
    write_bytes_atomic(lake, MASK_PATH, b"{not json")
    with pytest.raises(json.JSONDecodeError):
        read_mask(lake)
