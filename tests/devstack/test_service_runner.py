"""The in-process service runner (devstack.service_runner): uvicorn on loopback in a thread."""

from __future__ import annotations

import httpx
import pytest
from fastapi import FastAPI

from devstack.service_runner import InProcessService


def _app() -> FastAPI:
    app = FastAPI()

    @app.get("/ping")
    def ping() -> dict[str, str]:
        return {"pong": "yes"}

    return app


def test_it_serves_the_app_on_loopback_at_the_url_it_reports() -> None:
    with InProcessService(_app()) as service:
        assert service.url.startswith("http://127.0.0.1:")
        assert httpx.get(f"{service.url}/ping", timeout=5).json() == {"pong": "yes"}


def test_it_refuses_to_bind_anything_but_loopback() -> None:
    with pytest.raises(ValueError, match="loopback"):
        InProcessService(_app(), host="0.0.0.0")


def test_after_stop_nothing_listens() -> None:
    with InProcessService(_app()) as service:
        url = service.url
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{url}/ping", timeout=1)
