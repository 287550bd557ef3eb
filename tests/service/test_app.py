"""service/app.py's edges: the OpenAPI page served offline, 404 and 405 in the refusal body, request
bodies refused (413)."""

from __future__ import annotations

import re
from collections.abc import Iterator

from tests.service.conftest import World


def test_the_docs_page_loads_swagger_ui_from_the_service_itself_never_a_cdn(world: World) -> None:
    with world.client() as client:
        page = client.get("/docs")
        assets = re.findall(r'(?:src|href)="([^"]+)"', page.text)
        fetched = [client.get(asset).status_code for asset in assets]
    assert page.status_code == 200
    assert assets and all(asset.startswith("/docs/assets/") for asset in assets)
    assert fetched == [200] * len(assets)
    assert "cdn" not in page.text.lower()


def test_an_unknown_route_is_a_404_in_the_refusal_body(world: World) -> None:
    with world.client() as client:
        answer = client.get("/no/such/route")
    assert answer.status_code == 404
    assert answer.json() == {"error": "not_found", "message": "no such route"}


def test_a_method_a_route_does_not_take_is_a_405_in_the_refusal_body_with_its_allow_header(
    world: World,
) -> None:
    with world.client() as client:
        answer = client.get("/u-1/signup")
    assert answer.status_code == 405
    assert answer.json()["error"] == "method_not_allowed"
    assert answer.headers["allow"] == "POST"


def test_a_body_on_a_route_that_takes_none_is_a_413_and_nothing_is_done(world: World) -> None:
    with world.client() as client:
        answer = client.post("/u-1/signup", content=b"x" * 20_000_000)
    assert answer.status_code == 413
    assert answer.json()["error"] == "body_not_allowed"
    assert world.fake.calls["create_user"] == 0


def test_a_chunked_body_is_a_413_too(world: World) -> None:
    def chunks() -> Iterator[bytes]:
        yield b"{}"

    with world.client() as client:
        answer = client.post("/u-1/signup", content=chunks())
    assert answer.status_code == 413
    assert world.fake.calls["create_user"] == 0


def test_an_empty_post_is_served(world: World) -> None:
    with world.client() as client:
        answer = client.post("/u-1/signup", headers={"content-length": "0"})
    assert answer.status_code == 201
