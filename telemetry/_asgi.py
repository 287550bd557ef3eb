"""The service's request figures: an ASGI middleware counting each answered request by its route
template (never the path itself: it holds a user id) and status, with its duration."""

from __future__ import annotations

__all__ = ["RequestFigures"]

import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from telemetry._figures import service_request

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]


class RequestFigures:
    """`app.add_middleware(RequestFigures)`: the route is read after routing matched it (Starlette
    leaves it in the scope); a request no route matched counts as `unmatched`."""

    def __init__(self, app: App) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        status = 500  # an exception that escaped every handler

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        started = time.monotonic()
        try:
            await self._app(scope, receive, sending)
        finally:
            template = getattr(scope.get("route"), "path", None) or "unmatched"
            service_request(f"{scope.get('method', '')} {template}", status, time.monotonic() - started)
