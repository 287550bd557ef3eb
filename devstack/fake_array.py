"""A fake Array API on loopback: real HTTP (werkzeug's threaded server), delete-user only, with fault
injection and a record of every call, so tests can prove what Array saw.

The delete-user call is `schema.array` (the contract `processors.cleanup.HttpArrayClient` sends); the
fake answers:

    200 {"status": "deleted"}   the user existed and is now gone
    404                         unknown (or already deleted) user
    401                         missing or wrong server token, or credentials "expired" (fault)
    403                         wrong app key, or credentials "expired" with status 403 (fault)
    400                         the body is not JSON with a non-empty string userId
    405                         any other method
    429                         throttled (fault: a burst), with `Retry-After`
    500/502/503                 a server error (fault: a rate)

A timeout fault holds the request for `hang_seconds` (longer than the client's timeout) and then processes
it as usual, so the delete may have happened although the client saw a timeout: its retry then gets 404.

Accounts are registered in process (`add_users`) or over HTTP (`POST /__admin/users` with
`{"userIds": [...]}`); with `every_account_exists=True` (the demo) every account exists until its first
successful delete; `GET /__admin/users/<id>` answers 200 or 404, `GET /__admin/stats` the call counts,
`POST /__admin/faults` sets faults (the `FaultPlan` fields as JSON). The admin paths take no token: the
server only ever binds loopback.

    server = FakeArrayServer(host="127.0.0.1", port=0).start()
    server.url          # http://127.0.0.1:<port>
    server.stop()
"""

from __future__ import annotations

__all__ = [
    "DEFAULT_APP_KEY",
    "DEFAULT_SERVER_TOKEN",
    "ArrayCall",
    "FakeArrayServer",
    "FaultPlan",
]

import ipaddress
import json
import random
import threading
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from werkzeug.serving import BaseWSGIServer, WSGIRequestHandler, make_server
from werkzeug.wrappers import Request, Response

from schema import array as array_wire

DEFAULT_APP_KEY = "local-app-key"
DEFAULT_SERVER_TOKEN = "local-server-token"  # noqa: S105 (the local stack's documented default)
ADMIN_PREFIX = "/__admin"


@dataclass(frozen=True)
class FaultPlan:
    """Random faults, drawn per delete call from a seeded generator."""

    error_rate: float = 0.0  # fraction of calls answered 500/502/503
    timeout_rate: float = 0.0  # fraction of calls held for `hang_seconds` (then processed)
    hang_seconds: float = 2.0
    latency_seconds: float = 0.0  # added to every delete call

    def __post_init__(self) -> None:
        for name in ("error_rate", "timeout_rate"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must be within 0..1")
        if self.error_rate + self.timeout_rate > 1.0:
            raise ValueError("error_rate + timeout_rate must not exceed 1")
        if self.hang_seconds < 0 or self.latency_seconds < 0:
            raise ValueError("times must not be negative")


@dataclass(frozen=True)
class ArrayCall:
    """One request to the delete-user endpoint, as the fake saw and answered it."""

    received_at: float  # time.monotonic() on arrival
    method: str  # the effective method (DELETE for an override)
    user_id: str | None
    status: int
    fault: str | None  # "credentials", "throttle", "5xx", "timeout", or None
    deleted: bool  # this call removed the user


class _QuietHandler(WSGIRequestHandler):
    """No request logging: request lines hold client addresses."""

    def log(self, type: str, message: str, *args: Any) -> None:
        return

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        return


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class FakeArrayServer:
    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        app_key: str = DEFAULT_APP_KEY,
        server_token: str = DEFAULT_SERVER_TOKEN,
        faults: FaultPlan | None = None,
        seed: int = 0,
        every_account_exists: bool = False,
    ) -> None:
        if not _is_loopback(host):
            raise ValueError("the fake Array binds loopback only")
        self._host = host
        self._port = port
        self._app_key = app_key
        self._server_token = server_token
        self._lock = threading.Lock()
        self._rng = random.Random(seed)  # noqa: S311 (fault injection, not security)
        self._faults = faults or FaultPlan()
        self._users: set[str] = set()
        self._deleted: list[str] = []
        # Demo mode: every account the service ever linked exists at Array until deleted once, as in
        # production, without the simulator having to register each one.
        self._every_account_exists = every_account_exists
        self._calls: list[ArrayCall] = []
        self._throttle_remaining = 0
        self._throttle_retry_after = "0"
        self._credentials_until: float | None = None
        self._credentials_calls: int | None = None
        self._credentials_status = 401
        self._in_flight = 0
        self._max_in_flight = 0
        self._server: BaseWSGIServer | None = None
        self._thread: threading.Thread | None = None

    # ---- lifecycle -------------------------------------------------------------------------------

    def start(self) -> FakeArrayServer:
        if self._server is not None:
            raise RuntimeError("already started")
        server = make_server(self._host, self._port, self._wsgi, threaded=True, request_handler=_QuietHandler)
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, name="fake-array", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        server, thread = self._server, self._thread
        self._server = self._thread = None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        if thread is not None:
            thread.join(timeout=5)

    def __enter__(self) -> FakeArrayServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("not started")
        return int(self._server.server_port)

    @property
    def url(self) -> str:
        host = f"[{self._host}]" if ":" in self._host else self._host
        return f"http://{host}:{self.port}"

    # ---- accounts --------------------------------------------------------------------------------

    def add_users(self, user_ids: Iterable[str]) -> None:
        with self._lock:
            self._users.update(user_ids)

    def has_user(self, user_id: str) -> bool:
        with self._lock:
            return user_id in self._users

    def users(self) -> frozenset[str]:
        with self._lock:
            return frozenset(self._users)

    def deleted_users(self) -> list[str]:
        """Users removed by a delete call, in the order they went."""
        with self._lock:
            return list(self._deleted)

    # ---- faults ----------------------------------------------------------------------------------

    @property
    def faults(self) -> FaultPlan:
        with self._lock:
            return self._faults

    def set_faults(self, plan: FaultPlan | None = None, **changes: Any) -> FaultPlan:
        """Replace the fault plan, or change some of its fields: `set_faults(error_rate=0.3)`."""
        with self._lock:
            self._faults = replace(plan or self._faults, **changes)
            return self._faults

    def throttle_next(self, calls: int, *, retry_after_seconds: int = 0) -> None:
        """Answer the next `calls` delete calls with 429 (a burst)."""
        with self._lock:
            self._throttle_remaining = calls
            self._throttle_retry_after = str(retry_after_seconds)

    def expire_credentials(
        self, *, seconds: float | None = None, calls: int | None = None, status: int = 401
    ) -> None:
        """Refuse every delete with `status` (401 or 403) for a window: `seconds` of real time, or the
        next `calls` calls, or until `restore_credentials` when neither is given."""
        if status not in (401, 403):
            raise ValueError("an expired credential answers 401 or 403")
        with self._lock:
            self._credentials_until = time.monotonic() + seconds if seconds is not None else float("inf")
            self._credentials_calls = calls
            self._credentials_status = status

    def restore_credentials(self) -> None:
        with self._lock:
            self._credentials_until = None
            self._credentials_calls = None

    def clear_faults(self) -> None:
        with self._lock:
            self._faults = FaultPlan()
            self._throttle_remaining = 0
            self._credentials_until = None
            self._credentials_calls = None

    # ---- what Array saw --------------------------------------------------------------------------

    def calls(self) -> list[ArrayCall]:
        with self._lock:
            return list(self._calls)

    def calls_for(self, user_id: str) -> list[ArrayCall]:
        with self._lock:
            return [call for call in self._calls if call.user_id == user_id]

    def call_count(self, *, status: int | None = None, fault: str | None = None) -> int:
        with self._lock:
            return sum(
                1
                for call in self._calls
                if (status is None or call.status == status) and (fault is None or call.fault == fault)
            )

    def stats(self) -> dict[str, Any]:
        with self._lock:
            return {
                "calls": len(self._calls),
                "by_status": {str(k): v for k, v in sorted(Counter(c.status for c in self._calls).items())},
                "by_fault": dict(sorted(Counter(c.fault or "none" for c in self._calls).items())),
                "deleted": len(self._deleted),
                "users": len(self._users),
                "max_in_flight": self._max_in_flight,
            }

    @property
    def max_in_flight(self) -> int:
        """The most delete calls this server held at the same time."""
        with self._lock:
            return self._max_in_flight

    def reset_calls(self) -> None:
        with self._lock:
            self._calls.clear()
            self._max_in_flight = 0

    # ---- HTTP ------------------------------------------------------------------------------------

    def _wsgi(self, environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        request = Request(environ)
        if request.path.startswith(ADMIN_PREFIX):
            response = self._admin(request)
        elif request.path == array_wire.DELETE_USER_PATH:
            with self._lock:
                self._in_flight += 1
                self._max_in_flight = max(self._max_in_flight, self._in_flight)
            try:
                response = self._delete_user(request)
            finally:
                with self._lock:
                    self._in_flight -= 1
        else:
            response = _json(404, {"error": "not_found"})
        result: Iterable[bytes] = response(environ, start_response)
        return result

    def _delete_user(self, request: Request) -> Response:
        received_at = time.monotonic()
        method = request.method.upper()
        override = request.headers.get(array_wire.METHOD_OVERRIDE_HEADER, "").upper()
        if method == "POST" and override == array_wire.DELETE_METHOD:
            method = array_wire.DELETE_METHOD
        if method != array_wire.DELETE_METHOD:
            return _json(405, {"error": "method_not_allowed"})
        user_id = _user_id(request)
        plan = self.faults
        if plan.latency_seconds:
            time.sleep(plan.latency_seconds)

        def answer(status: int, fault: str | None = None, *, deleted: bool = False) -> Response:
            with self._lock:
                self._calls.append(ArrayCall(received_at, method, user_id, status, fault, deleted))
            return _json(status, {"status": "deleted"} if status == 200 else {"error": str(status)})

        credentials = self._credentials_refusal()
        if credentials is not None:
            return answer(credentials, "credentials")
        if request.headers.get(array_wire.SERVER_TOKEN_HEADER) != self._server_token:
            return answer(401)
        body = _body(request)
        if body is not None and body.get(array_wire.APP_KEY_FIELD) != self._app_key:
            return answer(403)
        if user_id is None:
            return answer(400)
        throttled, retry_after = self._take_throttle()
        if throttled:
            response = answer(429, "throttle")
            response.headers[array_wire.RETRY_AFTER_HEADER] = retry_after
            return response
        fault = self._draw_fault(plan)
        if fault == "5xx":
            with self._lock:
                status = self._rng.choice((500, 502, 503))
            return answer(status, "5xx")
        if fault == "timeout":
            time.sleep(plan.hang_seconds)
        with self._lock:
            existed = user_id in self._users or (self._every_account_exists and user_id not in self._deleted)
            if existed:
                self._users.discard(user_id)
                self._deleted.append(user_id)
        return answer(200 if existed else 404, fault, deleted=existed)

    def _credentials_refusal(self) -> int | None:
        with self._lock:
            if self._credentials_until is None:
                return None
            if time.monotonic() >= self._credentials_until:
                self._credentials_until = self._credentials_calls = None
                return None
            if self._credentials_calls is not None:
                if self._credentials_calls <= 0:
                    self._credentials_until = self._credentials_calls = None
                    return None
                self._credentials_calls -= 1
            return self._credentials_status

    def _take_throttle(self) -> tuple[bool, str]:
        with self._lock:
            if self._throttle_remaining <= 0:
                return False, ""
            self._throttle_remaining -= 1
            return True, self._throttle_retry_after

    def _draw_fault(self, plan: FaultPlan) -> str | None:
        if not plan.error_rate and not plan.timeout_rate:
            return None
        with self._lock:
            roll = self._rng.random()
        if roll < plan.error_rate:
            return "5xx"
        if roll < plan.error_rate + plan.timeout_rate:
            return "timeout"
        return None

    def _admin(self, request: Request) -> Response:
        path = request.path.removeprefix(ADMIN_PREFIX)
        if path == "/users" and request.method == "POST":
            body = _body(request) or {}
            ids = body.get("userIds")
            if not isinstance(ids, list) or not all(isinstance(i, str) and i for i in ids):
                return _json(400, {"error": "userIds must be a list of strings"})
            self.add_users(ids)
            return _json(200, {"added": len(ids)})
        if path.startswith("/users/") and request.method == "GET":
            return _json(200 if self.has_user(path.removeprefix("/users/")) else 404, {})
        if path == "/stats" and request.method == "GET":
            return _json(200, self.stats())
        if path == "/faults" and request.method == "POST":
            body = _body(request) or {}
            known = {f.name for f in fields(FaultPlan)}
            try:
                plan = self.set_faults(None, **{k: float(v) for k, v in body.items() if k in known})
            except (TypeError, ValueError):
                return _json(400, {"error": "invalid fault plan"})
            return _json(200, asdict(plan))
        return _json(404, {"error": "not_found"})


def _body(request: Request) -> dict[str, Any] | None:
    try:
        data = json.loads(request.get_data(cache=True) or b"null")
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def _user_id(request: Request) -> str | None:
    body = _body(request)
    value = body.get(array_wire.USER_ID_FIELD) if body is not None else None
    return value if isinstance(value, str) and value else None


def _json(status: int, payload: dict[str, Any]) -> Response:
    return Response(json.dumps(payload), status=status, mimetype="application/json")
