"""The decoder under mutated records of both shapes (the fuzzer: tests/pipeline/decode_fuzz.py).

A bounded run, in CI. The same fuzzer runs longer from the command line (counts printed, non-zero exit on
any failure): ``.venv/bin/python -m tests.pipeline.decode_fuzz --mutants 100000``.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.pipeline.decode_fuzz import Counts, Handlers, check, lake_tables


@pytest.fixture(scope="module")
def handlers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Handlers]:
    handlers = Handlers(Path(tmp_path_factory.mktemp("fuzz")))
    yield handlers
    handlers.reset()


@settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.randoms(use_true_random=False))
def test_a_mutant_is_refused_with_decode_error_or_decoded_as_the_reference_reads_it_and_handled(
    handlers: Handlers, rng: random.Random
) -> None:
    counts = Counts()

    event = check(rng, handlers, counts)
    if event is not None:
        lake_tables([event])  # its change rows build an Arrow table that Parquet writes

    assert counts.failures == []
