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

Relies on moto internals (pinned in pyproject.toml, moto[server]==5.2.5): `ThreadedMotoServer._server_entry`
is overridden to wrap moto's WSGI application, built from `DomainDispatcherApplication(create_backend_app)`
and served with (a subclass of) `MotoRequestHandler`, as moto 5.2.5 does; the subclass drops
werkzeug's request log, which would hold client addresses and request paths.
"""

from __future__ import annotations

__all__ = ["LOOPBACK", "MotoServer"]

import logging
import threading
from collections.abc import Callable, Iterable
from typing import Any

from moto.moto_server.threaded_moto_server import ThreadedMotoServer
from moto.moto_server.werkzeug_app import (
    DomainDispatcherApplication,
    MotoRequestHandler,
    create_backend_app,
)
from werkzeug.serving import make_server

from devstack._moto_patches import (
    install_query_cost,
    install_sqs_receive_cost,
    install_sqs_send_cost,
    install_stream_fidelity,
    install_transaction_rollback,
)

LOOPBACK = "127.0.0.1"

_log = logging.getLogger(__name__)

# X-Amz-Target prefixes of the calls served under the DynamoDB lock.
_SERIALISED_TARGETS = ("DynamoDB_20120810.", "DynamoDBStreams_20120810.")

_WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


class _SerialisedDynamoDB:
    """WSGI middleware: DynamoDB and Streams calls run one at a time under `lock`."""

    def __init__(self, app: _WsgiApp, lock: threading.RLock) -> None:
        self._app = app
        self._lock = lock

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        target = str(environ.get("HTTP_X_AMZ_TARGET", ""))
        if target.startswith(_SERIALISED_TARGETS):
            with self._lock:
                # moto builds the whole body inside the call; materialise it under the lock anyway.
                body = self._app(environ, start_response)
                try:
                    return list(body)
                finally:
                    close = getattr(body, "close", None)
                    if close is not None:
                        close()
        return self._app(environ, start_response)


class _QuietRequestHandler(MotoRequestHandler):
    """werkzeug's request log holds the client address and request paths (S3 object keys): drop it."""

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        return None

    def log(self, type: str, message: str, *args: Any) -> None:
        _log.debug("moto server %s message suppressed", type)


class _LockingThreadedMotoServer(ThreadedMotoServer):
    def __init__(self, port: int, lock: threading.RLock) -> None:
        super().__init__(ip_address=LOOPBACK, port=port, verbose=False)
        self._dynamodb_lock = lock

    def _server_entry(self) -> None:
        # As moto 5.2.5's ThreadedMotoServer._server_entry, with the application wrapped.
        app = _SerialisedDynamoDB(DomainDispatcherApplication(create_backend_app), self._dynamodb_lock)
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
        self.dynamodb_lock = threading.RLock()
        self._server = _LockingThreadedMotoServer(port, self.dynamodb_lock)
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
