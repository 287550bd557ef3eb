"""A fake Array API on loopback: real HTTP (werkzeug's threaded server) serving the calls of the Array
wire contract (`schema.array`): delete-user (cleanup, erasure), create-user and processor-token (the
service), with per-call knobs (latency, faults, call counts), hooks that hold a call until a named event
(`devstack._fake_http.Hooks`), and a record of every delete, so tests can prove what Array saw.

delete-user answers:

    200 {"status": "deleted"}   the user existed and is now gone
    404                         unknown (or already deleted) user
    401                         missing or wrong server token, or credentials "expired" (fault)
    403                         wrong app key, or credentials "expired" with status 403 (fault)
    400                         the body is not JSON with a non-empty string userId
    405                         any other method
    429                         throttled (fault: a burst), with `Retry-After`
    500/502/503                 a server error (fault: a rate)

create-user (`POST /api/user/v2` without the override header) answers 201 {"userId": <a new Array user
id>} on every call, a repeated client key included (it does not deduplicate: docs/local-stack.md says
what we assume of the real Array), which then exists (a later delete of it answers 200);
`reuse_next(client_key)` makes the next create-user for that user answer 200 with the account it created
last for them ("the same account arriving again"), as does `reuse_rate` at random. processor-token
answers 200 {"status": "linked"} for an Array user that exists, 404 otherwise, 400 without a string
`processorToken`; the token is counted, never kept. Both answer 401/403 on credentials and 5xx/timeouts
by their fault plan.

A timeout fault holds the request for `hang_seconds` (longer than the client's timeout) and then processes
it as usual, so the delete may have happened although the client saw a timeout: its retry then gets 404.

Hold keys: create-user by our user id (the client key), processor-token and delete-user by the Array
user id. Accounts are registered in process (`add_users`) or over HTTP (`POST /__admin/users` with
`{"userIds": [...]}`); with `every_account_exists=True` every account exists until its first successful
delete; `GET /__admin/users/<id>` answers 200 or 404, `GET /__admin/stats` the call counts, `POST
/__admin/faults` sets faults (the `FaultPlan` fields as JSON, `call` one of `CALLS`, default delete-user),
and the hooks' admin paths (see `devstack._fake_http`). The admin paths take no token: the server only
ever binds loopback.

    server = FakeArrayServer(host="127.0.0.1", port=0).start()
    server.url          # http://127.0.0.1:<port>
    server.stop()
"""

from __future__ import annotations

__all__ = [
    "CALLS",
    "CREATE_USER",
    "DEFAULT_APP_KEY",
    "DEFAULT_SERVER_TOKEN",
    "DELETE_USER",
    "PROCESSOR_TOKEN",
    "ArrayCall",
    "FakeArrayServer",
    "FaultPlan",
]

import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from werkzeug.wrappers import Request, Response

from devstack._fake_http import (
    ADMIN_PREFIX,
    FaultPlan,
    Hold,
    Hooks,
    Knobs,
    LoopbackServer,
    ServedFake,
    json_response,
    request_json,
)
from schema import array as array_wire

DEFAULT_APP_KEY = "local-app-key"
DEFAULT_SERVER_TOKEN = "local-server-token"  # noqa: S105 (the local stack's documented default)

DELETE_USER = "delete_user"
CREATE_USER = "create_user"
PROCESSOR_TOKEN = "processor_token"  # noqa: S105 (a call kind, not a secret)
CALLS = (DELETE_USER, CREATE_USER, PROCESSOR_TOKEN)


@dataclass(frozen=True)
class ArrayCall:
    """One request to the delete-user endpoint, as the fake saw and answered it."""

    received_at: float  # time.monotonic() on arrival
    method: str  # the effective method (DELETE for an override)
    user_id: str | None
    status: int
    fault: str | None  # "credentials", "throttle", "5xx", "timeout", or None
    deleted: bool  # this call removed the user


class FakeArrayServer(ServedFake):
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
        hooks: Hooks | None = None,
    ) -> None:
        self._http = LoopbackServer(host, port, self._wsgi, name="fake Array")
        self._app_key = app_key
        self._server_token = server_token
        self._lock = threading.Lock()
        self._knobs = Knobs(CALLS, seed=seed)
        if faults is not None:
            self._knobs.set(DELETE_USER, faults)
        self.hooks = hooks or Hooks()
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
        self._created: dict[str, list[str]] = {}  # client key (our user id) -> accounts created, in order
        self._reuse_next: Counter[str] = Counter()
        self._reuse_rate = 0.0
        self._linked: Counter[str] = Counter()  # Array user id -> successful processor-token calls

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
        """The delete-user call's fault plan."""
        return self._knobs.plan(DELETE_USER)

    def faults_for(self, call: str) -> FaultPlan:
        return self._knobs.plan(call)

    def set_faults(
        self, plan: FaultPlan | None = None, *, call: str = DELETE_USER, **changes: Any
    ) -> FaultPlan:
        """Replace a call's fault plan, or change some of its fields: `set_faults(error_rate=0.3)`
        (delete-user), `set_faults(call=PROCESSOR_TOKEN, latency_seconds=0.05)`."""
        return self._knobs.set(call, plan, **changes)

    def hold(self, call: str, *, until: str, key: str | None = None, times: int = 1) -> Hold:
        """Hold the next `times` calls of `call` (for `key`, when given) until `hooks.set(until)`."""
        if call not in CALLS:
            raise ValueError("unknown call kind")
        return self.hooks.hold(call, until=until, key=key, times=times)

    def reuse_next(self, user_id: str, times: int = 1) -> None:
        """The next `times` create-user calls for our `user_id` return the account it holds already."""
        with self._lock:
            self._reuse_next[user_id] += times

    def set_reuse_rate(self, rate: float) -> None:
        """A share of create-user calls for a user who has an account answer with that account."""
        if not 0.0 <= rate <= 1.0:
            raise ValueError("reuse_rate must be within 0..1")
        with self._lock:
            self._reuse_rate = rate

    def accounts_created_for(self, user_id: str) -> list[str]:
        with self._lock:
            return list(self._created.get(user_id, []))

    def links(self, array_user_id: str) -> int:
        """Successful processor-token calls for this Array user."""
        with self._lock:
            return self._linked[array_user_id]

    def call_count_of(self, call: str, *, status: int | None = None) -> int:
        """Calls of a kind (`CALLS`), optionally only those answered with `status`."""
        return self._knobs.call_count(call, status=status)

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
        self._knobs.clear()
        with self._lock:
            self._reuse_rate = 0.0
            self._reuse_next.clear()
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
                "by_call": self._knobs.counts(),
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
        self._knobs.reset_counts()

    # ---- HTTP ------------------------------------------------------------------------------------

    def _wsgi(self, environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        request = Request(environ)
        if request.path.startswith(ADMIN_PREFIX):
            response = self._admin(request)
        elif request.path == array_wire.PROCESSOR_TOKEN_PATH:
            response = self._processor_token(request)
        elif request.path == array_wire.DELETE_USER_PATH:
            method = request.method.upper()
            override = request.headers.get(array_wire.METHOD_OVERRIDE_HEADER, "").upper()
            if method == array_wire.CREATE_USER_METHOD and not override:
                response = self._create_user(request)
            else:
                with self._lock:
                    self._in_flight += 1
                    self._max_in_flight = max(self._max_in_flight, self._in_flight)
                try:
                    response = self._delete_user(request)
                finally:
                    with self._lock:
                        self._in_flight -= 1
        else:
            response = json_response(404, {"error": "not_found"})
        result: Iterable[bytes] = response(environ, start_response)
        return result

    def _refusal(self, request: Request, call: str, body: dict[str, Any] | None) -> Response | None:
        """Credentials, then the fault plan: the answer when the call is refused or failed, else None."""
        credentials = self._credentials_refusal()
        if credentials is not None:
            return self._counted(call, credentials)
        if request.headers.get(array_wire.SERVER_TOKEN_HEADER) != self._server_token:
            return self._counted(call, 401)
        if body is None:
            return self._counted(call, 400)
        if body.get(array_wire.APP_KEY_FIELD) != self._app_key:
            return self._counted(call, 403)
        fault = self._knobs.draw(call)
        if fault == "5xx":
            return self._counted(call, self._knobs.server_error())
        if fault == "timeout":
            time.sleep(self._knobs.plan(call).hang_seconds)
        return None

    def _counted(self, call: str, status: int, payload: dict[str, Any] | None = None) -> Response:
        self._knobs.count(call, status)
        return json_response(status, payload if payload is not None else {"error": str(status)})

    def _create_user(self, request: Request) -> Response:
        body = request_json(request)
        client_key = body.get(array_wire.CLIENT_KEY_FIELD) if body is not None else None
        self.hooks.gate(CREATE_USER, client_key if isinstance(client_key, str) else None)
        refused = self._refusal(request, CREATE_USER, body)
        if refused is not None:
            return refused
        if not isinstance(client_key, str) or not client_key:
            return self._counted(CREATE_USER, 400)
        with self._lock:
            held = [a for a in self._created.get(client_key, []) if a in self._users]
            reuse = bool(held) and (
                self._reuse_next[client_key] > 0
                or (self._reuse_rate > 0 and self._knobs.roll() < self._reuse_rate)
            )
            if reuse:
                if self._reuse_next[client_key] > 0:
                    self._reuse_next[client_key] -= 1
                account = held[-1]
            else:
                account = f"arr-{uuid.uuid4().hex}"
                self._created.setdefault(client_key, []).append(account)
                self._users.add(account)
        status = 200 if reuse else 201
        return self._counted(CREATE_USER, status, {array_wire.USER_ID_FIELD: account})

    def _processor_token(self, request: Request) -> Response:
        if request.method.upper() != array_wire.PROCESSOR_TOKEN_METHOD:
            return json_response(405, {"error": "method_not_allowed"})
        body = request_json(request)
        array_user = body.get(array_wire.USER_ID_FIELD) if body is not None else None
        self.hooks.gate(PROCESSOR_TOKEN, array_user if isinstance(array_user, str) else None)
        refused = self._refusal(request, PROCESSOR_TOKEN, body)
        if refused is not None:
            return refused
        assert body is not None
        token = body.get(array_wire.PROCESSOR_TOKEN_FIELD)
        if not isinstance(array_user, str) or not array_user or not isinstance(token, str) or not token:
            return self._counted(PROCESSOR_TOKEN, 400)
        with self._lock:
            exists = array_user in self._users or (
                self._every_account_exists and array_user not in self._deleted
            )
            if exists:
                self._linked[array_user] += 1
        if not exists:
            return self._counted(PROCESSOR_TOKEN, 404)
        return self._counted(PROCESSOR_TOKEN, 200, {"status": "linked"})

    def _delete_user(self, request: Request) -> Response:
        received_at = time.monotonic()
        method = request.method.upper()
        override = request.headers.get(array_wire.METHOD_OVERRIDE_HEADER, "").upper()
        if method == "POST" and override == array_wire.DELETE_METHOD:
            method = array_wire.DELETE_METHOD
        if method != array_wire.DELETE_METHOD:
            return json_response(405, {"error": "method_not_allowed"})
        user_id = _user_id(request)
        self.hooks.gate(DELETE_USER, user_id)
        plan = self.faults
        if plan.latency_seconds:
            time.sleep(plan.latency_seconds)

        def answer(status: int, fault: str | None = None, *, deleted: bool = False) -> Response:
            with self._lock:
                self._calls.append(ArrayCall(received_at, method, user_id, status, fault, deleted))
            self._knobs.count(DELETE_USER, status)
            return json_response(status, {"status": "deleted"} if status == 200 else {"error": str(status)})

        credentials = self._credentials_refusal()
        if credentials is not None:
            return answer(credentials, "credentials")
        if request.headers.get(array_wire.SERVER_TOKEN_HEADER) != self._server_token:
            return answer(401)
        body = request_json(request)
        if body is not None and body.get(array_wire.APP_KEY_FIELD) != self._app_key:
            return answer(403)
        if user_id is None:
            return answer(400)
        throttled, retry_after = self._take_throttle()
        if throttled:
            response = answer(429, "throttle")
            response.headers[array_wire.RETRY_AFTER_HEADER] = retry_after
            return response
        fault = self._draw_fault()
        if fault == "5xx":
            return answer(self._knobs.server_error(), "5xx")
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

    def _draw_fault(self) -> str | None:
        # The delete's latency is slept above (before the credential checks, as always): draw only.
        return self._knobs.draw(DELETE_USER, sleep_latency=False)

    def _admin(self, request: Request) -> Response:
        path = request.path.removeprefix(ADMIN_PREFIX)
        hooks = self.hooks.admin(request, path)
        if hooks is not None:
            return hooks
        if path == "/users" and request.method == "POST":
            body = request_json(request) or {}
            ids = body.get("userIds")
            if not isinstance(ids, list) or not all(isinstance(i, str) and i for i in ids):
                return json_response(400, {"error": "userIds must be a list of strings"})
            self.add_users(ids)
            return json_response(200, {"added": len(ids)})
        if path.startswith("/users/") and request.method == "GET":
            return json_response(200 if self.has_user(path.removeprefix("/users/")) else 404, {})
        if path == "/stats" and request.method == "GET":
            return json_response(200, self.stats())
        if path == "/faults" and request.method == "POST":
            body = request_json(request) or {}
            try:
                plan = self._knobs.admin_set(body, DELETE_USER)
            except ValueError:
                return json_response(400, {"error": "invalid fault plan"})
            return json_response(200, asdict(plan))
        return json_response(404, {"error": "not_found"})


def _user_id(request: Request) -> str | None:
    body = request_json(request)
    value = body.get(array_wire.USER_ID_FIELD) if body is not None else None
    return value if isinstance(value, str) and value else None
