"""The KCL child process: one per shard, started by the Java launcher, speaking the multilang protocol
on stdin/stdout. `main()` only: settings from the environment, the consumer from the composition root
(`entitlements.compose`), then kclpy. It imports no CLI module and makes nothing on AWS.

Nothing here may write to stdout: it is the protocol channel. Everything the child says is one JSON line
on stderr (`entitlements._logging`), which the daemon copies as it is into the log stream
(docs/operations/logs.md): logging is set up before anything else is imported, so a failed import, an
uncaught exception, a warning and whatever kclpy reports are JSON lines too, each naming an exception by
its class only. A refused setting is reported by its field and rule, never its value; a missing queue by
the setup command that makes it.
"""

from __future__ import annotations

__all__ = ["main"]

import logging
import sys
from types import TracebackType

from entitlements._logging import configure_logging

logger = logging.getLogger("entitlements.child")


def _log_uncaught(kind: type[BaseException], error: BaseException, traceback: TracebackType | None) -> None:
    # The class only: an exception's message and traceback can carry a record's data.
    logger.critical("child stopped by an uncaught exception", extra={"error": kind.__name__})


class _KclpyErrors:
    """kclpy's error file. kclpy writes there an exception it caught from an action, with its message
    and traceback; this turns each into one ERROR line naming the exception's class."""

    def write(self, text: str) -> int:
        return len(text)

    def flush(self) -> None:
        kind = sys.exc_info()[0]
        if kind is not None:
            logger.error("kclpy caught an exception from an action", extra={"error": kind.__name__})


def main() -> None:
    configure_logging()
    sys.excepthook = _log_uncaught
    logging.captureWarnings(True)

    # Imported once logging is set up, so that a failed import is a JSON line too.
    from amazon_kclpy import kcl  # noqa: PLC0415

    import telemetry  # noqa: PLC0415
    from config import SettingsError, load_settings  # noqa: PLC0415
    from entitlements import compose  # noqa: PLC0415
    from pipeline import KclRecordProcessor  # noqa: PLC0415

    try:
        settings = load_settings()
        consumer = compose.shard_consumer(settings)
        # EMF to the configured file or socket (never stdout); Prometheus figures reach `consume`'s
        # endpoint through PROMETHEUS_MULTIPROC_DIR, which it sets for the daemon.
        telemetry.publish_emf(settings.metrics, process="consumer")
    except (SettingsError, compose.SetupMissingError, telemetry.EmfSinkError) as refused:
        logger.critical(
            "child refused to start", extra={"reason": str(refused), "error": type(refused).__name__}
        )
        raise SystemExit(2) from None
    kcl.KCLProcess(KclRecordProcessor(consumer), error_file=_KclpyErrors()).run()


if __name__ == "__main__":
    main()
