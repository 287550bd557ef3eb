"""The lake's worker writer process: one beside each KCL worker, started and restarted by the worker's
daemon (`pipeline.daemon.KclDaemon`), committing its children's flushes (`analytics.lake.worker_writer`).
`main()` only: settings from the environment (the daemon's, as its children get them), the writer from
the composition root, then serve until SIGTERM or until the process that started it is gone.

Log lines are JSON on stderr (`entitlements._logging`), which the daemon sends where the children's go.
"""

from __future__ import annotations

__all__ = ["main"]

import logging
import os
import signal
import threading
from types import FrameType

from entitlements._logging import configure_logging

logger = logging.getLogger("entitlements.lake_writer")


def main() -> None:
    configure_logging()
    parent = os.getppid()
    stop = threading.Event()

    def _stop(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)

    from config import SettingsError, load_settings  # noqa: PLC0415
    from entitlements import compose  # noqa: PLC0415

    try:
        settings = load_settings()
        writer = compose.lake_worker_writer(settings)
    except (SettingsError, compose.SetupMissingError) as refused:
        logger.critical(
            "lake writer refused to start", extra={"reason": str(refused), "error": type(refused).__name__}
        )
        raise SystemExit(2) from None
    try:
        writer.serve(stop, parent=parent)
    except OSError as error:
        # Most often its address is taken: another writer of this worker still runs.
        logger.critical("lake writer could not listen", extra={"error": type(error).__name__})
        raise SystemExit(3) from None


if __name__ == "__main__":
    main()
