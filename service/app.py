"""The entitlements service's HTTP API (FastAPI on uvicorn; the OpenAPI page is `/docs`, its Swagger UI
assets served by the service itself from the pinned swagger-ui-bundle, so it works offline).

    POST /{user_id}/signup         201 created | 200 already signed up (nothing written)
    POST /{user_id}/cancellation   200 Cancelled
    POST /{user_id}/reactivation   200 Active again
    POST /{user_id}/array-signup   201 new row | 200 the same account again (nothing written)
    POST /{user_id}/processor      200 linked | 404 ErrEntitlementNotActive (arraylink)
    GET  /stats                    counts only (writes by kind, outcomes by kind and by kind:detail)

Every refusal is a JSON body `{"error": <code>, "message": <words>}`: 404 unknown user, entitlement not
active or no such route, 405 a method the route does not take, 409 wrong state (`concurrent_request`:
a concurrent request for the user changed its rows first, service/writes.py), 413 a request body (no
route takes one), 422 validation or an Idempotency-Key reused for another route, 502 a downstream
refusal, 503 (with Retry-After) when a downstream call kept failing through its retries: safe to retry.
Every write route takes an optional `Idempotency-Key` header: a retry with the same key gets the first
answer (service/idempotency.py). No body, message or log line holds a user id, an account id, a key or
a token; the server's access log is off (paths hold user ids).

Route handlers are plain functions: FastAPI runs them on its thread pool, each on the service's
thread-safe parts (boto3 and httpx clients).
"""

from __future__ import annotations

__all__ = ["ServiceParts", "create_app"]

import json
import logging
import threading
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Annotated, Any

import swagger_ui_bundle  # type: ignore[import-untyped]  # ships no type hints
from fastapi import FastAPI, Header, Path, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

import telemetry
from schema.errors import EntitlementsError, RetryableError
from service.arraylink import link_and_record
from service.errors import ServiceRefusal, ServiceUnavailableError
from service.idempotency import IDEMPOTENCY_KEY_PATTERN, Idempotency, Replay
from service.ids import USER_ID_PATTERN
from service.outcomes import OutcomeRecorder
from service.parts import ServiceParts
from service.writes import SignupResult

logger = logging.getLogger(__name__)

UserId = Annotated[str, Path(pattern=USER_ID_PATTERN, description="Our user id (the erasure ACCOUNT key)")]
IdempotencyKey = Annotated[
    str | None,
    Header(
        alias="Idempotency-Key",
        pattern=IDEMPOTENCY_KEY_PATTERN,
        description="Optional: a retry with the same key returns the first answer (service/idempotency.py)",
    ),
]


class Account(BaseModel):
    arrayAccountId: str
    status: str
    written: bool


class SecondSignup(Account):
    retired: bool


class Linked(BaseModel):
    arrayAccountId: str
    status: str = "linked"


class ErrorBody(BaseModel):
    error: str
    message: str


_REFUSALS: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorBody, "description": "unknown user, or no Active entitlement"},
    409: {"model": ErrorBody, "description": "the user's rows are not in the state the operation needs"},
    422: {"model": ErrorBody, "description": "validation"},
    502: {"model": ErrorBody, "description": "Array or transactions-service refused the call"},
    503: {"model": ErrorBody, "description": "a downstream call kept failing: safe to retry"},
}


def _refusal(status: int, code: str, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(status_code=status, content={"error": code, "message": message}, headers=headers)


def _answer(error: EntitlementsError) -> JSONResponse:
    if isinstance(error, ServiceRefusal):
        return _refusal(error.status, error.code, str(error))
    if isinstance(error, RetryableError):
        code = error.code if isinstance(error, ServiceUnavailableError) else "table_unavailable"
        return _refusal(503, code, "a downstream call kept failing: retry the request", {"Retry-After": "1"})
    # A terminal AWS error (its message is the operation and the AWS code) or another terminal failure.
    return _refusal(500, "internal", str(error) if hasattr(error, "operation") else type(error).__name__)


_DOCS_ASSETS = "/docs/assets"
_HTTP_REFUSALS = {
    404: ("not_found", "no such route"),
    405: ("method_not_allowed", "the route does not take this method"),
}
_BODY_REFUSAL = b'{"error":"body_not_allowed","message":"the service\'s routes take no request body"}'


class _NoBody:
    """Refuses (413 `body_not_allowed`) any request carrying a body: no route takes one. A declared
    Content-Length over 0 is refused unread; a chunked body is refused at its first non-empty chunk."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        length = headers.get(b"content-length", b"0").strip() or b"0"
        if not length.isdigit() or int(length) > 0:
            await _refuse_body(send)
            return
        if b"transfer-encoding" not in headers:
            await self._app(scope, receive, send)
            return
        first = await receive()  # chunked: read what the client sent before the route runs
        if first.get("body") or first.get("more_body"):
            await _refuse_body(send)
            return
        replayed = False

        async def again() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return first
            return await receive()

        await self._app(scope, again, send)


async def _refuse_body(send: Send) -> None:
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(_BODY_REFUSAL)).encode())]
    await send(
        {"type": "http.response.start", "status": 413, "headers": [*headers, (b"connection", b"close")]}
    )
    await send({"type": "http.response.body", "body": _BODY_REFUSAL})


class _Flusher:
    """Lands the recorded outcomes in the lake at least every `seconds`, and once more at shutdown."""

    def __init__(self, recorder: OutcomeRecorder, seconds: float) -> None:
        self._recorder = recorder
        self._seconds = seconds
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="outcome-flusher", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._seconds):
            self._flush()

    def _flush(self) -> None:
        try:
            self._recorder.flush()
        except EntitlementsError as failed:  # kept buffered: the next flush writes the same files
            logger.warning("outcome flush failed", extra={"error": type(failed).__name__})

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
        self._flush()


def create_app(parts: ServiceParts) -> FastAPI:
    """The ASGI app. Its lifespan starts the outcome flusher and, at shutdown, lands what is left."""

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        flusher = _Flusher(parts.recorder, parts.outcome_flush_seconds)
        flusher.start()
        try:
            yield
        finally:
            flusher.stop()
            if parts.close is not None:
                parts.close()

    app = FastAPI(
        title="entitlements service",
        description="Signup, cancellation, reactivation, second Array signup and Array link writes.",
        version="1",
        lifespan=lifespan,
        responses=_REFUSALS,
        docs_url=None,  # served below from the pinned swagger-ui-bundle, never a CDN
        redoc_url=None,
    )
    app.add_middleware(_NoBody)  # no route takes a body: any is refused before it is read further
    app.add_middleware(telemetry.RequestFigures)  # requests by route template and status
    app.mount(_DOCS_ASSETS, StaticFiles(directory=str(swagger_ui_bundle.swagger_ui_path)), name="docs-assets")

    @app.get("/docs", include_in_schema=False)
    def docs() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=app.openapi_url or "/openapi.json",
            title="entitlements service",
            swagger_js_url=f"{_DOCS_ASSETS}/swagger-ui-bundle.js",
            swagger_css_url=f"{_DOCS_ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{_DOCS_ASSETS}/favicon-32x32.png",
        )

    @app.exception_handler(StarletteHTTPException)
    async def http_refused(_: Request, error: StarletteHTTPException) -> JSONResponse:
        # 404 (no such route) and 405 (a route without this method) in the body every refusal uses.
        code, message = _HTTP_REFUSALS.get(error.status_code, (f"http_{error.status_code}", "refused"))
        return _refusal(error.status_code, code, message, dict(error.headers or {}))

    @app.exception_handler(EntitlementsError)
    async def refused(_: Request, error: EntitlementsError) -> JSONResponse:
        return _answer(error)

    @app.exception_handler(Exception)
    async def failed(_: Request, error: Exception) -> JSONResponse:
        # An unexpected failure: its class only (a message or traceback may hold data).
        logger.error("request failed", extra={"error": type(error).__name__})
        return _refusal(500, "internal", "the request failed")

    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, error: RequestValidationError) -> JSONResponse:
        # Where, never what: the input may be a user id.
        fields = sorted({".".join(str(part) for part in detail.get("loc", ())) for detail in error.errors()})
        return _refusal(422, "validation", "invalid request: " + ", ".join(fields))

    service = parts.service
    keyed = _Keyed(parts.idempotency or Idempotency(service.table, service.clock))

    @app.post("/{user_id}/signup", status_code=201, response_model=Account)
    def signup(user_id: UserId, idempotency_key: IdempotencyKey = None) -> Any:
        """Create the user at Array, then the user's guard + a fresh Active row, in one transaction."""
        return keyed(user_id, idempotency_key, "signup", lambda: _account(service.signup(user_id), 201))

    @app.post("/{user_id}/cancellation", response_model=Account)
    def cancellation(user_id: UserId, idempotency_key: IdempotencyKey = None) -> Any:
        """The guard, the Active row Cancelled and the cancellation record, in one transaction."""

        def run() -> JSONResponse:
            body = Account(arrayAccountId=service.cancel(user_id), status="Cancelled", written=True)
            return JSONResponse(status_code=200, content=body.model_dump())

        return keyed(user_id, idempotency_key, "cancellation", run)

    @app.post("/{user_id}/reactivation", response_model=Account)
    def reactivation(user_id: UserId, idempotency_key: IdempotencyKey = None) -> Any:
        """The guard, the cancellation record deleted and its row Active again, in one transaction."""

        def run() -> JSONResponse:
            body = Account(arrayAccountId=service.reactivate(user_id), status="Active", written=True)
            return JSONResponse(status_code=200, content=body.model_dump())

        return keyed(user_id, idempotency_key, "reactivation", run)

    @app.post("/{user_id}/array-signup", status_code=201, response_model=SecondSignup)
    def array_signup(user_id: UserId, idempotency_key: IdempotencyKey = None) -> Any:
        """A second Array signup: new Active row, the old one retired with a stale cleanup record."""

        def run() -> JSONResponse:
            result = service.second_signup(user_id)
            body = SecondSignup(
                arrayAccountId=result.array_account_id,
                status="Active",
                written=result.written,
                retired=result.retired,
            )
            return JSONResponse(status_code=201 if result.written else 200, content=body.model_dump())

        return keyed(user_id, idempotency_key, "array-signup", run)

    @app.post("/{user_id}/processor", response_model=Linked)
    def processor(user_id: UserId, idempotency_key: IdempotencyKey = None) -> Any:
        """arraylink: resolve the primary account, post its processor token to Array, SaveIfActive."""

        def run() -> JSONResponse:
            attempt = link_and_record(parts.arraylink, parts.recorder, user_id, job_id=uuid.uuid4().hex)
            if attempt.error is not None:
                return _answer(attempt.error)
            body = Linked(arrayAccountId=attempt.array_account_id or "")
            return JSONResponse(status_code=200, content=body.model_dump())

        return keyed(user_id, idempotency_key, "processor", run)

    @app.get("/stats")
    def stats() -> dict[str, dict[str, int]]:
        """Counts only: the service's writes by kind, its outcomes by kind and by kind and detail
        (`link.not_active:save_refused` counts the links SaveIfActive refused)."""
        outcomes, details = parts.recorder.snapshot()
        return {"requests": service.snapshot(), "outcomes": outcomes, "outcome_details": details}

    return app


class _Keyed:
    """Runs one request; with an Idempotency-Key, at most once: a retry gets the first answer."""

    def __init__(self, idempotency: Idempotency) -> None:
        self._idempotency = idempotency

    def __call__(
        self, user_id: str, key: str | None, route: str, run: Callable[[], JSONResponse]
    ) -> JSONResponse:
        if key is None:
            return _answered(run)
        begun = self._idempotency.begin(user_id, key, route)  # a refusal is answered as every other
        if isinstance(begun, Replay):
            return JSONResponse(
                status_code=begun.status,
                content=json.loads(begun.body),
                headers={"Idempotent-Replayed": "true"},
            )
        try:
            response = _answered(run)
        except Exception:
            self._idempotency.finish(user_id, begun, 500, "")  # released: the retry runs
            raise
        self._idempotency.finish(user_id, begun, response.status_code, bytes(response.body).decode("utf-8"))
        return response


def _answered(run: Callable[[], JSONResponse]) -> JSONResponse:
    """The route's answer, a refusal answered here (so that it can be stored for a keyed request)."""
    try:
        return run()
    except EntitlementsError as error:
        return _answer(error)


def _account(result: SignupResult, created: int) -> JSONResponse:
    body = Account(arrayAccountId=result.array_account_id, status="Active", written=result.written)
    return JSONResponse(status_code=created if result.written else 200, content=body.model_dump())
