"""`entitlements serve`: the entitlements service's HTTP API on uvicorn (127.0.0.1 by default).

Its host and port are `ENTITLEMENTS_SERVICE__HOST` / `__PORT` (or `--host` / `--port`); Array is
`ENTITLEMENTS_ARRAY__*`, transactions-service `ENTITLEMENTS_SERVICE__TRANSACTIONS_BASE_URL`. The OpenAPI
page is `/docs` (its assets served by the service: it works offline). Several `serve` processes may
share one table: every write path is guarded in DynamoDB itself (docs/table.md). Uvicorn's access log
is off: request paths hold user ids.
"""

from __future__ import annotations

__all__ = ["app"]

from typing import Annotated

import typer

from config import load_settings
from devstack.ports import ensure_free_ports
from entitlements._logging import configure_logging

app = typer.Typer(no_args_is_help=False, add_completion=False)


@app.command()
def serve(
    host: Annotated[str | None, typer.Option(help="Bind address (default: service.host, 127.0.0.1).")] = None,
    port: Annotated[int | None, typer.Option(help="Port (default: service.port).")] = None,
) -> None:
    """Serve signup, cancellation, reactivation, second Array signup and POST /{user_id}/processor."""
    import uvicorn  # noqa: PLC0415 (the web stack is imported when it serves: --help stays fast)

    from entitlements import compose  # noqa: PLC0415

    configure_logging()
    settings = load_settings()
    bind = host or settings.service.host
    chosen = settings.service.port if port is None else port
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
