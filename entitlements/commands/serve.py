"""`entitlements serve`: the entitlements service's HTTP API on uvicorn (127.0.0.1 by default).

Its host and port are `ENTITLEMENTS_SERVICE__HOST` / `__PORT` (or `--host` / `--port`); Array is
`ENTITLEMENTS_ARRAY__*`, transactions-service `ENTITLEMENTS_SERVICE__TRANSACTIONS_BASE_URL`. The OpenAPI
page is `/docs` (its assets served by the service: it works offline). Several `serve` processes may
share one table: every write path is guarded in DynamoDB itself (docs/table.md). Uvicorn's access log
is off: request paths hold user ids.
"""

from __future__ import annotations

__all__ = ["app"]

import socket
from typing import Annotated

import typer

from devstack.ports import ensure_free_ports
from entitlements._logging import configure_logging
from schema.errors import TerminalError

app = typer.Typer(no_args_is_help=False, add_completion=False)


class BindAddressRefused(TerminalError):
    """The address to serve on is not one this machine can listen on (not an address or a name that
    resolves, or none of its interfaces'). Names the option or variable, never the value."""


def ensure_bindable(host: str, option: str) -> None:
    """Refuse, before uvicorn starts (it would log a bare `gaierror` and exit 3), a bind address that
    does not resolve or that no interface of this machine holds."""
    fix = "use 127.0.0.1 (the default) or another address of this machine"
    try:
        family, kind, _, _, address = socket.getaddrinfo(host, 0, type=socket.SOCK_STREAM)[0]
    except (socket.gaierror, UnicodeError):
        raise BindAddressRefused(
            f"the address to serve on ({option}) is neither an IP address nor a name that resolves: {fix}"
        ) from None
    with socket.socket(family, kind) as probe:
        try:
            probe.bind((address[0], 0))
        except OSError as refused:
            raise BindAddressRefused(
                f"cannot listen on the address to serve on ({option}): {refused.strerror}: {fix}"
            ) from None


@app.command()
def serve(
    host: Annotated[str | None, typer.Option(help="Bind address (default: service.host, 127.0.0.1).")] = None,
    port: Annotated[
        int | None, typer.Option(min=0, max=65535, help="Port (default: service.port; 0 a free one).")
    ] = None,
) -> None:
    """Serve signup, cancellation, reactivation, second Array signup and POST /{user_id}/processor."""
    import uvicorn  # noqa: PLC0415 (the web stack is imported when it serves: --help stays fast)

    from config import load_settings  # noqa: PLC0415 (kept off --help)
    from entitlements import compose  # noqa: PLC0415

    configure_logging()
    settings = load_settings()
    bind = host or settings.service.host
    chosen = settings.service.port if port is None else port
    ensure_bindable(bind, "--host" if host else "ENTITLEMENTS_SERVICE__HOST")
    option = "--port" if port is not None else "--port or ENTITLEMENTS_SERVICE__PORT"
    ensure_free_ports({option: chosen}, host=bind)  # uvicorn would log a traceback and exit
    import telemetry  # noqa: PLC0415 (kept off --help)

    metrics = settings.metrics
    with telemetry.running_metrics(
        metrics, process="service", port=metrics.service_port, variable="ENTITLEMENTS_METRICS__SERVICE_PORT"
    ):
        uvicorn.run(
            compose.service_app(settings),
            host=bind,
            port=chosen,
            log_config=None,  # the entry point's JSON logging on stderr
            access_log=False,
            lifespan="on",
        )
