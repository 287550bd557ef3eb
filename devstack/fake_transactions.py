"""A fake transactions-service on loopback: the user's primary account (`schema.array`'s primary-account
call, which arraylink makes before it posts the processor token to Array).

    GET /users/<our userId>/primary-account
    -> 200 {"accountId": "<account id>", "processorToken": "<secret>"}
       404 the user has no primary account; 5xx (fault plan); the fault plan's latency and timeouts

Every user has one primary account, derived from the user id and the server's seed unless
`set_primary` names one (or `remove_primary` takes it away; `every_user_has_account=False` starts with
none). The processor token is derived the same way and is never logged or recorded. Knobs: the fault
plan (`set_faults`), hooks that hold a call for a user until a named event (`hold`, shared `Hooks`), call
counts (`call_count`, `GET /__admin/stats`); admin paths as in `devstack._fake_http`, plus `POST
/__admin/primary` `{"userId", "accountId"}`.

    with FakeTransactionsServer() as transactions:
        transactions.url    # http://127.0.0.1:<port>
"""

from __future__ import annotations

__all__ = ["PRIMARY_ACCOUNT", "FakeTransactionsServer"]

import hashlib
import re
import threading
import time
from collections.abc import Iterable
from dataclasses import asdict
from typing import Any
from urllib.parse import unquote

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
from schema import array as wire

PRIMARY_ACCOUNT = "primary_account"
# The contract's path with the user id as its one segment (built by `schema.array.primary_account_path`).
_PREFIX, _SUFFIX = wire.primary_account_path("USER").split("USER")
_PATH = re.compile(f"^{re.escape(_PREFIX)}([^/]+){re.escape(_SUFFIX)}$")


class FakeTransactionsServer(ServedFake):
    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        seed: int = 0,
        every_user_has_account: bool = True,
        faults: FaultPlan | None = None,
        hooks: Hooks | None = None,
    ) -> None:
        self._http = LoopbackServer(host, port, self._wsgi, name="fake transactions-service")
        self._seed = seed
        self._every_user_has_account = every_user_has_account
        self._knobs = Knobs((PRIMARY_ACCOUNT,), seed=seed)
        if faults is not None:
            self._knobs.set(PRIMARY_ACCOUNT, faults)
        self.hooks = hooks or Hooks()
        self._lock = threading.Lock()
        self._primary: dict[str, str | None] = {}

    # ---- accounts and knobs ----------------------------------------------------------------------

    def _derived(self, kind: str, user_id: str) -> str:
        digest = hashlib.sha256(f"{self._seed}/{kind}/{user_id}".encode()).hexdigest()
        return digest[:24]

    def primary_account(self, user_id: str) -> str | None:
        with self._lock:
            if user_id in self._primary:
                return self._primary[user_id]
        return f"acc-{self._derived('account', user_id)}" if self._every_user_has_account else None

    def processor_token(self, user_id: str) -> str:
        """The token this fake hands out for the user (tests compare against it; never log it)."""
        return f"ptok-{self._derived('token', user_id)}"

    def set_primary(self, user_id: str, account_id: str) -> None:
        with self._lock:
            self._primary[user_id] = account_id

    def remove_primary(self, user_id: str) -> None:
        with self._lock:
            self._primary[user_id] = None

    @property
    def faults(self) -> FaultPlan:
        return self._knobs.plan(PRIMARY_ACCOUNT)

    def set_faults(self, plan: FaultPlan | None = None, **changes: Any) -> FaultPlan:
        return self._knobs.set(PRIMARY_ACCOUNT, plan, **changes)

    def clear_faults(self) -> None:
        self._knobs.clear()

    def hold(self, *, until: str, key: str | None = None, times: int = 1) -> Hold:
        """Hold the next `times` primary-account calls (for our user id `key`) until `hooks.set(until)`."""
        return self.hooks.hold(PRIMARY_ACCOUNT, until=until, key=key, times=times)

    def call_count(self, *, status: int | None = None) -> int:
        return self._knobs.call_count(PRIMARY_ACCOUNT, status=status)

    def stats(self) -> dict[str, Any]:
        return {"by_call": self._knobs.counts()}

    def reset_calls(self) -> None:
        self._knobs.reset_counts()

    # ---- HTTP ------------------------------------------------------------------------------------

    def _wsgi(self, environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        request = Request(environ)
        match = _PATH.match(request.path)
        if request.path.startswith(ADMIN_PREFIX):
            response = self._admin(request)
        elif match is None:
            response = json_response(404, {"error": "not_found"})
        elif request.method.upper() != wire.PRIMARY_ACCOUNT_METHOD:
            response = json_response(405, {"error": "method_not_allowed"})
        else:
            response = self._primary_account(unquote(match.group(1)))
        result: Iterable[bytes] = response(environ, start_response)
        return result

    def _primary_account(self, user_id: str) -> Response:
        self.hooks.gate(PRIMARY_ACCOUNT, user_id)
        fault = self._knobs.draw(PRIMARY_ACCOUNT)
        if fault == "5xx":
            status = self._knobs.server_error()
            self._knobs.count(PRIMARY_ACCOUNT, status)
            return json_response(status, {"error": str(status)})
        if fault == "timeout":
            time.sleep(self.faults.hang_seconds)
        account = self.primary_account(user_id)
        if account is None:
            self._knobs.count(PRIMARY_ACCOUNT, 404)
            return json_response(404, {"error": "no_primary_account"})
        self._knobs.count(PRIMARY_ACCOUNT, 200)
        return json_response(
            200,
            {wire.ACCOUNT_ID_FIELD: account, wire.PROCESSOR_TOKEN_FIELD: self.processor_token(user_id)},
        )

    def _admin(self, request: Request) -> Response:
        path = request.path.removeprefix(ADMIN_PREFIX)
        hooks = self.hooks.admin(request, path)
        if hooks is not None:
            return hooks
        if path == "/stats" and request.method == "GET":
            return json_response(200, self.stats())
        if path == "/faults" and request.method == "POST":
            try:
                plan = self._knobs.admin_set(request_json(request) or {}, PRIMARY_ACCOUNT)
            except ValueError:
                return json_response(400, {"error": "invalid fault plan"})
            return json_response(200, asdict(plan))
        if path == "/primary" and request.method == "POST":
            body = request_json(request) or {}
            user, account = body.get("userId"), body.get("accountId")
            if not (isinstance(user, str) and user and isinstance(account, str) and account):
                return json_response(400, {"error": "userId and accountId must be strings"})
            self.set_primary(user, account)
            return json_response(200, {})
        return json_response(404, {"error": "not_found"})
