"""What every loopback fake in `devstack` shares: the server's lifecycle, per-call knobs and hooks.

- `LoopbackServer`: werkzeug's threaded server on loopback only, no request logging (request lines hold
  client addresses), `url`, `start`/`stop`, context manager.
- `FaultPlan`: per call kind, random faults drawn from a seeded generator (5xx, timeout) and added
  latency. `Knobs` holds one plan per call kind and counts the calls of each kind.
- `Hooks`: named events and holds. `hold(call, key=..., until=event)` makes the next matching call (its
  kind, and its subject when `key` is given: a user id, an Array account) wait inside the fake until
  `set(event)`; the returned `Hold` says when the call arrived (so a test or the demo knows the caller is
  inside its network window) and when it was let go. Hooks may be shared by several fakes, so one event
  releases calls held at either. A held call is released at the latest after `max_hold_seconds` (so a
  forgotten event never hangs a run) and then proceeds as usual.

Admin paths (`/__admin/...`, no token: the servers bind loopback only) let another process drive the
same knobs: `POST /__admin/faults` `{"call": ..., <FaultPlan fields>}`, `POST /__admin/holds`
`{"call", "key", "until", "times"}` -> `{"id"}`, `GET /__admin/holds/<id>`, `POST /__admin/events/<name>`,
`GET /__admin/stats`.
"""

from __future__ import annotations

__all__ = [
    "ADMIN_PREFIX",
    "FaultPlan",
    "Hold",
    "Hooks",
    "Knobs",
    "LoopbackServer",
    "ServedFake",
    "is_loopback",
    "json_response",
    "request_json",
]

import ipaddress
import itertools
import json
import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any, Self

from werkzeug.serving import BaseWSGIServer, WSGIRequestHandler, make_server
from werkzeug.wrappers import Request, Response

ADMIN_PREFIX = "/__admin"


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def request_json(request: Request) -> dict[str, Any] | None:
    """The request's JSON object body, or None when it is not one."""
    try:
        data = json.loads(request.get_data(cache=True) or b"null")
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def json_response(status: int, payload: dict[str, Any]) -> Response:
    return Response(json.dumps(payload), status=status, mimetype="application/json")


@dataclass(frozen=True)
class FaultPlan:
    """Random faults, drawn per call from a seeded generator."""

    error_rate: float = 0.0  # fraction of calls answered 500/502/503
    timeout_rate: float = 0.0  # fraction of calls held for `hang_seconds` (then processed)
    hang_seconds: float = 2.0
    latency_seconds: float = 0.0  # added to every call

    def __post_init__(self) -> None:
        for name in ("error_rate", "timeout_rate"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must be within 0..1")
        if self.error_rate + self.timeout_rate > 1.0:
            raise ValueError("error_rate + timeout_rate must not exceed 1")
        if self.hang_seconds < 0 or self.latency_seconds < 0:
            raise ValueError("times must not be negative")


class Knobs:
    """One fault plan per call kind, drawn from one seeded generator, and the calls of each kind."""

    def __init__(self, calls: Iterable[str], *, seed: int = 0) -> None:
        self._lock = threading.Lock()
        self._rng = random.Random(seed)  # noqa: S311 (fault injection, not security)
        self._plans: dict[str, FaultPlan] = {call: FaultPlan() for call in calls}
        self._counts: Counter[str] = Counter()
        self._statuses: Counter[tuple[str, int]] = Counter()

    @property
    def calls(self) -> tuple[str, ...]:
        return tuple(self._plans)

    def plan(self, call: str) -> FaultPlan:
        with self._lock:
            return self._plans[call]

    def set(self, call: str, plan: FaultPlan | None = None, **changes: Any) -> FaultPlan:
        with self._lock:
            if call not in self._plans:
                raise ValueError("unknown call kind")
            self._plans[call] = replace(plan or self._plans[call], **changes)
            return self._plans[call]

    def clear(self) -> None:
        with self._lock:
            self._plans = {call: FaultPlan() for call in self._plans}

    def draw(self, call: str, *, sleep_latency: bool = True) -> str | None:
        """Sleep the call's latency (unless the caller already has), then draw its fault: "5xx",
        "timeout" or None."""
        plan = self.plan(call)
        if sleep_latency and plan.latency_seconds:
            time.sleep(plan.latency_seconds)
        if not plan.error_rate and not plan.timeout_rate:
            return None
        with self._lock:
            roll = self._rng.random()
        if roll < plan.error_rate:
            return "5xx"
        if roll < plan.error_rate + plan.timeout_rate:
            return "timeout"
        return None

    def roll(self) -> float:
        """A draw in [0, 1) from the seeded generator."""
        with self._lock:
            return self._rng.random()

    def server_error(self) -> int:
        with self._lock:
            return self._rng.choice((500, 502, 503))

    def count(self, call: str, status: int) -> None:
        with self._lock:
            self._counts[call] += 1
            self._statuses[(call, status)] += 1

    def call_count(self, call: str, *, status: int | None = None) -> int:
        with self._lock:
            if status is None:
                return self._counts[call]
            return self._statuses[(call, status)]

    def counts(self) -> dict[str, dict[str, int]]:
        """Per call kind: the total and the count of each answered status."""
        with self._lock:
            out: dict[str, dict[str, int]] = {}
            for call in self._plans:
                by_status = {str(s): n for (c, s), n in sorted(self._statuses.items()) if c == call}
                out[call] = {"calls": self._counts[call], **by_status}
            return out

    def reset_counts(self) -> None:
        with self._lock:
            self._counts.clear()
            self._statuses.clear()

    def admin_set(self, body: dict[str, Any], default_call: str) -> FaultPlan:
        """`POST /__admin/faults`: the FaultPlan fields, optionally `call`. ValueError when invalid."""
        call = body.get("call", default_call)
        if not isinstance(call, str):
            raise ValueError("call must be a string")
        known = {f.name for f in fields(FaultPlan)}
        try:
            return self.set(call, None, **{k: float(v) for k, v in body.items() if k in known})
        except TypeError:
            raise ValueError("invalid fault plan") from None


@dataclass
class Hold:
    """One hold: the next `times` calls of kind `call` (with subject `key`, when given) wait for `until`."""

    id: str
    call: str
    key: str | None
    until: str
    times: int = 1
    arrived: threading.Event = field(default_factory=threading.Event)
    released: threading.Event = field(default_factory=threading.Event)
    held: int = 0

    def matches(self, call: str, key: str | None) -> bool:
        return self.times > 0 and self.call == call and (self.key is None or self.key == key)

    def wait_arrived(self, timeout: float) -> bool:
        return self.arrived.wait(timeout)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "call": self.call,
            "until": self.until,
            "arrived": self.arrived.is_set(),
            "released": self.released.is_set(),
            "held": self.held,
        }


class Hooks:
    """Named events and the holds that wait for them; one instance may serve several fakes."""

    def __init__(self, *, max_hold_seconds: float = 60.0) -> None:
        self._lock = threading.Lock()
        self._events: dict[str, threading.Event] = {}
        self._holds: list[Hold] = []
        self._ids = itertools.count(1)
        self.max_hold_seconds = max_hold_seconds

    def _event(self, name: str) -> threading.Event:
        with self._lock:
            return self._events.setdefault(name, threading.Event())

    def hold(self, call: str, *, until: str, key: str | None = None, times: int = 1) -> Hold:
        if times < 1:
            raise ValueError("a hold holds at least one call")
        with self._lock:
            hold = Hold(id=f"H{next(self._ids)}", call=call, key=key, until=until, times=times)
            self._holds.append(hold)
        return hold

    def set(self, event: str) -> None:
        """Fire `event`: every call held until it goes on (and any later hold on it does not wait)."""
        self._event(event).set()

    def is_set(self, event: str) -> bool:
        return self._event(event).is_set()

    def get(self, hold_id: str) -> Hold | None:
        with self._lock:
            return next((h for h in self._holds if h.id == hold_id), None)

    def clear(self) -> None:
        """Forget every hold and event; calls still held are let go."""
        with self._lock:
            events, self._events, self._holds = self._events, {}, []
        for event in events.values():
            event.set()

    def gate(self, call: str, key: str | None) -> None:
        """Called by a fake as a call arrives: wait here while a matching hold says so."""
        with self._lock:
            hold = next((h for h in self._holds if h.matches(call, key)), None)
            if hold is None:
                return
            hold.times -= 1
            hold.held += 1
            event = self._events.setdefault(hold.until, threading.Event())
        hold.arrived.set()
        event.wait(self.max_hold_seconds)
        hold.released.set()

    def admin(self, request: Request, path: str) -> Response | None:
        """The hooks' admin paths (already stripped of ADMIN_PREFIX), or None when not one of them."""
        if path == "/holds" and request.method == "POST":
            body = request_json(request) or {}
            call, until, key = body.get("call"), body.get("until"), body.get("key")
            times = body.get("times", 1)
            if not (isinstance(call, str) and isinstance(until, str) and until):
                return json_response(400, {"error": "call and until must be strings"})
            if key is not None and not isinstance(key, str):
                return json_response(400, {"error": "key must be a string"})
            if not isinstance(times, int) or times < 1:
                return json_response(400, {"error": "times must be a positive integer"})
            return json_response(200, self.hold(call, until=until, key=key, times=times).to_json())
        if path.startswith("/holds/") and request.method == "GET":
            hold = self.get(path.removeprefix("/holds/"))
            return json_response(404, {}) if hold is None else json_response(200, hold.to_json())
        if path.startswith("/events/") and request.method == "POST":
            name = path.removeprefix("/events/")
            if not name:
                return json_response(400, {"error": "an event needs a name"})
            self.set(name)
            return json_response(200, {"event": name})
        return None


class _QuietHandler(WSGIRequestHandler):
    """No request logging: request lines hold client addresses."""

    def log(self, type: str, message: str, *args: Any) -> None:
        return

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        return


class LoopbackServer:
    """A threaded werkzeug server for one WSGI callable, on loopback only."""

    def __init__(self, host: str, port: int, app: Callable[..., Iterable[bytes]], *, name: str) -> None:
        if not is_loopback(host):
            raise ValueError(f"the {name} binds loopback only")
        self._host = host
        self._port = port
        self._app = app
        self._name = name
        self._server: BaseWSGIServer | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._server is not None:
            raise RuntimeError("already started")
        server = make_server(self._host, self._port, self._app, threaded=True, request_handler=_QuietHandler)
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, name=self._name, daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        server, thread = self._server, self._thread
        self._server = self._thread = None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        if thread is not None:
            thread.join(timeout=5)

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("not started")
        return int(self._server.server_port)

    @property
    def url(self) -> str:
        host = f"[{self._host}]" if ":" in self._host else self._host
        return f"http://{host}:{self.port}"


class ServedFake:
    """What every fake's lifecycle is: its `LoopbackServer` (`_http`) started and stopped, as a context
    manager, with the address it serves on."""

    _http: LoopbackServer

    def start(self) -> Self:
        self._http.start()
        return self

    def stop(self) -> None:
        self._http.stop()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        return self._http.port

    @property
    def url(self) -> str:
        return self._http.url


def plan_json(plan: FaultPlan) -> dict[str, Any]:
    return asdict(plan)
