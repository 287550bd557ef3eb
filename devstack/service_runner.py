"""The entitlements service's ASGI app served in this process, on loopback, for `simulate` and the demo.

    with InProcessService(compose.service_app(settings)) as service:
        service.url     # http://127.0.0.1:<port>

uvicorn in a thread, its lifespan on (the app's outcome flusher runs and lands what is left at stop), its
access log off (request paths hold user ids), no signal handlers (the caller's process owns them).
"""

from __future__ import annotations

__all__ = ["InProcessService"]

import threading
import time
from typing import Any

import uvicorn

from devstack._fake_http import is_loopback


class _ThreadServer(uvicorn.Server):
    def install_signal_handlers(self) -> None:  # the thread's caller owns the signals
        return


class InProcessService:
    def __init__(
        self, app: Any, *, host: str = "127.0.0.1", port: int = 0, start_timeout: float = 30.0
    ) -> None:
        if not is_loopback(host):
            raise ValueError("the in-process service binds loopback only")
        config = uvicorn.Config(
            app, host=host, port=port, log_config=None, access_log=False, lifespan="on", log_level="warning"
        )
        self._server = _ThreadServer(config)
        self._host = host
        self._start_timeout = start_timeout
        self._thread: threading.Thread | None = None
        self._port: int | None = None

    def start(self) -> InProcessService:
        if self._thread is not None:
            raise RuntimeError("already started")
        self._thread = threading.Thread(target=self._server.run, name="service", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + self._start_timeout
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the in-process service did not start")
            time.sleep(0.02)
        sockets = [s for server in self._server.servers for s in server.sockets]
        self._port = int(sockets[0].getsockname()[1])
        return self

    def stop(self) -> None:
        thread, self._thread = self._thread, None
        if thread is None:
            return
        self._server.should_exit = True
        thread.join(timeout=60)

    def __enter__(self) -> InProcessService:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        if self._port is None:
            raise RuntimeError("not started")
        return f"http://{self._host}:{self._port}"
