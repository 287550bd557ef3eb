"""moto on loopback: DynamoDB, DynamoDB Streams, SQS, SNS, S3 and CloudWatch on one 127.0.0.1 port.

The host is fixed at 127.0.0.1: nothing here can listen off loopback.

`MotoServer` is moto's `ThreadedMotoServer` with one addition: DynamoDB and DynamoDB Streams requests are
served one at a time under `dynamodb_lock`, the lock the TTL emulator holds while it deletes. moto's
DynamoDB backend is not thread-safe (stream sequence numbers are `len(records) + start`, and a failed
TransactWriteItems restores a deep copy of the whole table, stream included), so without it concurrent
writers and the emulator could lose or duplicate stream records. Other services (SQS long polls) are not
serialised.

It also installs `devstack._moto_patches.install_transaction_rollback()`: without it a refused
TransactWriteItems orphans the stream shard every open iterator reads (phantom records, then nothing)
and every transaction copies the whole table. And `install_stream_fidelity()`: a put or update that
changes nothing writes no stream record, as in AWS (docs/local-stack.md). And `install_sqs_send_cost()`:
an SQS send costs what it sends, not the depth of the queue, and `install_sqs_receive_cost()`: a receive
what it returns. And `install_query_cost()`: a Query of a table reads its partition, not every item.
And `install_page_cap()`: a GetRecords page stops at 1 MB, as in AWS. And `install_kinesis_resharding()`:
a Kinesis split or merge moves no record, later puts go to the open children and a closed shard ends.

Each serialised call's service time (inside the lock, so no wait for it) is kept in `service_times`
(the last `SERVICE_LOG_CALLS` calls: the action, when it began being served, how long it was served,
the bytes answered), and answered as JSON on `GET /_devstack/service-times` (the bench reads the
service time of moto's GetRecords calls from a moto in another process; `bench/_moto.py`).

Kinesis GetRecords calls (`Kinesis_20131202.GetRecords`) are recorded the same way, served one at a
time under a lock of their own (`kinesis_read_lock`; not the DynamoDB lock, so a TTL pass does not hold
up a Kinesis read): `python -m bench kinesis` sums their service time over a stream's shards, which
counts each moment once only if no two reads overlap. Only the reads are serialised: puts and the
other Kinesis calls are served as before. The answer is passed on as moto built it, byte for byte.

Relies on moto internals (pinned in pyproject.toml, moto[server]==5.2.5): `ThreadedMotoServer._server_entry`
is overridden to wrap moto's WSGI application, built from `DomainDispatcherApplication(create_backend_app)`
and served with (a subclass of) `MotoRequestHandler`, as moto 5.2.5 does; the subclass drops
werkzeug's request log, which would hold client addresses and request paths.
"""

from __future__ import annotations

__all__ = ["LOOPBACK", "SERVICE_TIMES_PATH", "MotoServer", "ServedCall"]

import json
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import astuple, dataclass
from typing import Any

from moto.moto_server.threaded_moto_server import ThreadedMotoServer
from moto.moto_server.werkzeug_app import (
    DomainDispatcherApplication,
    MotoRequestHandler,
    create_backend_app,
)
from werkzeug.serving import make_server

from devstack._moto_patches import (
    install_kinesis_resharding,
    install_page_cap,
    install_query_cost,
    install_sqs_receive_cost,
    install_sqs_send_cost,
    install_stream_fidelity,
    install_transaction_rollback,
)
from devstack.export import install_faithful_export

LOOPBACK = "127.0.0.1"

_log = logging.getLogger(__name__)

# X-Amz-Target prefixes of the calls served under the DynamoDB lock.
_SERIALISED_TARGETS = ("DynamoDB_20120810.", "DynamoDBStreams_20120810.")
# The Kinesis call served one at a time under the Kinesis read lock, and recorded.
_KINESIS_GET_RECORDS = "Kinesis_20131202.GetRecords"

_WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]

SERVICE_TIMES_PATH = "/_devstack/service-times"
SERVICE_LOG_CALLS = 100_000


@dataclass(frozen=True)
class ServedCall:
    """One serialised call as moto served it: `action` (the X-Amz-Target, e.g.
    `DynamoDBStreams_20120810.GetRecords` or `Kinesis_20131202.GetRecords`), `began` (epoch seconds,
    once the lock was held), `seconds` (served under the lock: no wait for it), `bytes` (of the answer)."""

    action: str
    began: float
    seconds: float
    bytes: int


class _SerialisedCalls:
    """WSGI middleware: DynamoDB and Streams calls run one at a time under `lock`, Kinesis GetRecords
    calls under `kinesis_reads`, and S3 conditional writes one at a time under a lock of their own (see
    `MotoServer`)."""

    def __init__(
        self,
        app: _WsgiApp,
        lock: threading.RLock,
        served: deque[ServedCall],
        kinesis_reads: threading.Lock,
    ) -> None:
        self._app = app
        self._lock = lock
        self._kinesis_reads = kinesis_reads
        self._conditional_writes = threading.Lock()
        self._served = served

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        target = str(environ.get("HTTP_X_AMZ_TARGET", ""))
        if target.startswith(_SERIALISED_TARGETS):
            return self._served_under(self._lock, environ, start_response, action=target)
        if target == _KINESIS_GET_RECORDS:
            return self._served_under(self._kinesis_reads, environ, start_response, action=target)
        if environ.get("PATH_INFO") == SERVICE_TIMES_PATH and environ.get("REQUEST_METHOD") == "GET":
            body = json.dumps([astuple(call) for call in list(self._served)]).encode()
            start_response(
                "200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))]
            )
            return [body]
        if _is_conditional_write(environ):
            return self._served_under(self._conditional_writes, environ, start_response)
        return self._app(environ, start_response)

    def _served_under(
        self,
        lock: threading.Lock | threading.RLock,
        environ: dict[str, Any],
        start_response: Callable[..., Any],
        action: str | None = None,
    ) -> list[bytes]:
        with lock:
            began, started = time.time(), time.perf_counter()
            # moto builds the whole body inside the call; materialise it under the lock anyway.
            body = self._app(environ, start_response)
            try:
                answer = list(body)
            finally:
                close = getattr(body, "close", None)
                if close is not None:
                    close()
            if action is not None:
                seconds = time.perf_counter() - started
                self._served.append(ServedCall(action, began, seconds, sum(len(part) for part in answer)))
            return answer


def _is_conditional_write(environ: dict[str, Any]) -> bool:
    """A PUT or POST (an S3 object write, a multipart completion) carrying If-None-Match or If-Match."""
    if environ.get("REQUEST_METHOD") not in ("PUT", "POST"):
        return False
    return "HTTP_IF_NONE_MATCH" in environ or "HTTP_IF_MATCH" in environ


class _QuietRequestHandler(MotoRequestHandler):
    """werkzeug's request log holds the client address and request paths (S3 object keys): drop it."""

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        return None

    def log(self, type: str, message: str, *args: Any) -> None:
        _log.debug("moto server %s message suppressed", type)


class _LockingThreadedMotoServer(ThreadedMotoServer):
    def __init__(
        self, port: int, lock: threading.RLock, served: deque[ServedCall], kinesis_reads: threading.Lock
    ) -> None:
        super().__init__(ip_address=LOOPBACK, port=port, verbose=False)
        self._dynamodb_lock = lock
        self._served = served
        self._kinesis_reads = kinesis_reads

    def _server_entry(self) -> None:
        # As moto 5.2.5's ThreadedMotoServer._server_entry, with the application wrapped.
        app = _SerialisedCalls(
            DomainDispatcherApplication(create_backend_app),
            self._dynamodb_lock,
            self._served,
            self._kinesis_reads,
        )
        self._server = make_server(LOOPBACK, self._port, app, True, request_handler=_QuietRequestHandler)
        self._server_ready_event.set()
        self._server.serve_forever()


class MotoServer:
    """A moto server in this process, on 127.0.0.1 and the given port (0: a free one)."""

    def __init__(self, port: int = 0) -> None:
        if not 0 <= port <= 65535:
            raise ValueError("port must be between 0 and 65535")
        install_transaction_rollback()  # process-wide: moto's state is shared by every server here
        install_stream_fidelity()  # no stream record for a write that changes nothing, as in AWS
        install_sqs_send_cost()  # an SQS send costs what it sends, whatever the queue's depth, as in AWS
        install_sqs_receive_cost()  # and a receive what it returns
        install_query_cost()  # a Query of a table costs its partition, not the table
        install_page_cap()  # a GetRecords page stops at 1 MB, as in AWS
        install_kinesis_resharding()  # a split or merge moves no record; children get the new ones
        install_faithful_export()  # ExportTableToPointInTime: a snapshot under the lock, AWS's layout
        self.dynamodb_lock = threading.RLock()
        self.kinesis_read_lock = threading.Lock()  # Kinesis GetRecords, one at a time (module docstring)
        # The serialised calls' service times, newest last (see the module docstring).
        self.service_times: deque[ServedCall] = deque(maxlen=SERVICE_LOG_CALLS)
        self._server = _LockingThreadedMotoServer(
            port, self.dynamodb_lock, self.service_times, self.kinesis_read_lock
        )
        self._endpoint: str | None = None

    def start(self) -> str:
        """Start serving; returns the endpoint URL (http://127.0.0.1:<port>)."""
        if self._endpoint is None:
            self._server.start()
            host, port = self._server.get_host_and_port()
            self._endpoint = f"http://{host}:{port}"
        return self._endpoint

    @property
    def endpoint(self) -> str:
        if self._endpoint is None:
            raise RuntimeError("moto server not started")
        return self._endpoint

    @property
    def port(self) -> int:
        return int(self.endpoint.rsplit(":", 1)[1])

    def stop(self) -> None:
        if self._endpoint is not None:
            self._server.stop()
            self._endpoint = None

    def __enter__(self) -> MotoServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
