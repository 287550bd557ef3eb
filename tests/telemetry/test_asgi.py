"""telemetry/_asgi.py: the service's requests counted by route template and status, never by path."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.testclient import TestClient
from prometheus_client import REGISTRY, generate_latest

import telemetry

USER = "u-canary-7d1e"


def app() -> FastAPI:
    served = FastAPI()
    served.add_middleware(telemetry.RequestFigures)

    @served.post("/{user_id}/signup", status_code=201)
    def signup(user_id: str) -> dict[str, str]:
        return {"ok": "yes"}

    return served


def requests(route: str, status: str) -> float:
    labels = {"route": route, "status": status}
    return REGISTRY.get_sample_value("entitlements_service_requests_total", labels) or 0.0


def test_a_request_is_counted_by_its_route_template_and_status() -> None:
    before = requests("POST /{user_id}/signup", "201")
    with TestClient(app()) as client:
        client.post(f"/{USER}/signup")
    assert requests("POST /{user_id}/signup", "201") == before + 1


def test_a_path_no_route_matches_is_counted_as_unmatched() -> None:
    before = requests("GET unmatched", "404")
    with TestClient(app()) as client:
        client.get(f"/{USER}/nothing-here")
    assert requests("GET unmatched", "404") == before + 1


def test_no_user_id_reaches_the_figures() -> None:
    with TestClient(app()) as client:
        client.post(f"/{USER}/signup")
        client.get(f"/{USER}/nothing-here")
    assert USER.encode() not in generate_latest(REGISTRY)
