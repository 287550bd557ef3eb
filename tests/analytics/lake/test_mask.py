"""analytics/lake/_mask.py: the erasure mask kept in the lake, and no temporary copy of it left behind."""

from __future__ import annotations

import json
import os
import time

import pytest

from analytics.lake import Lake
from analytics.lake._files import write_bytes_atomic
from analytics.lake._mask import LEFTOVER_AGE, MASK_PATH, read_mask, write_mask


def test_a_lake_no_erasure_has_masked_masks_nobody(lake: Lake) -> None:
    assert read_mask(lake) == frozenset()


def test_the_mask_written_is_the_mask_read(lake: Lake) -> None:
    write_mask(lake, ["u2", "u1", "u2"])
    assert read_mask(lake) == frozenset({"u1", "u2"})


def test_a_mask_that_cannot_be_read_raises_rather_than_masking_nobody(lake: Lake) -> None:
    write_bytes_atomic(lake, MASK_PATH, b"{not json")
    with pytest.raises(json.JSONDecodeError):
        read_mask(lake)


def test_a_write_deletes_a_temporary_mask_a_crash_left_and_keeps_a_fresh_one(lake: Lake) -> None:
    write_mask(lake, ["u1"])
    folder = os.path.dirname(lake.path(MASK_PATH))
    stale, fresh = (os.path.join(folder, f".mask.json.{n}.tmp") for n in ("crashed", "writing"))
    for path in (stale, fresh):
        with open(path, "w") as leftover:
            leftover.write('{"user_ids": ["u1"]}')
    old = time.time() - LEFTOVER_AGE - 5
    os.utime(stale, (old, old))
    write_mask(lake, [])
    assert (os.path.exists(stale), os.path.exists(fresh), read_mask(lake)) == (False, True, frozenset())
