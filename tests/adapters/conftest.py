"""The fake Array on a loopback port, for the HTTP edge's tests against a real server."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from devstack.fake_array import FakeArrayServer


@pytest.fixture
def fake_array() -> Iterator[FakeArrayServer]:
    server = FakeArrayServer(host="127.0.0.1", port=0).start()
    try:
        yield server
    finally:
        server.stop()
