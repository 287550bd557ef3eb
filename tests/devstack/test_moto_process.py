"""devstack/moto_process.py: the project's moto server in a process of its own, on loopback, that a test
can freeze (a hung dependency) and thaw."""

from __future__ import annotations

import httpx
import pytest

from devstack.moto_process import moto_process


def test_a_frozen_moto_answers_nothing_until_it_is_thawed() -> None:
    with moto_process() as moto:
        assert moto.endpoint.startswith("http://127.0.0.1:")
        moto.freeze()
        with pytest.raises(httpx.ReadTimeout):
            httpx.get(f"{moto.endpoint}/moto-api/", timeout=1)
        moto.thaw()
        assert httpx.get(f"{moto.endpoint}/moto-api/", timeout=10).status_code == 200
