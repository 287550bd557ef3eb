"""The KCL child process: one per shard, started by the Java launcher, speaking the multilang protocol
on stdin/stdout. `main()` only: settings from the environment, the consumer from the composition root
(`entitlements.compose`), then kclpy. It imports no CLI module and makes nothing on AWS.

Nothing here may write to stdout: it is the protocol channel. A refused setting is reported on stderr
by its field and rule, never its value; a missing queue by the setup command that makes it.
"""

from __future__ import annotations

__all__ = ["main"]

import sys

from amazon_kclpy import kcl

import telemetry
from config import SettingsError, load_settings
from entitlements import compose
from entitlements._logging import configure_logging
from pipeline.record_processor import KclRecordProcessor


def main() -> None:
    configure_logging()
    try:
        settings = load_settings()
        consumer = compose.shard_consumer(settings)
        # EMF to the configured file or socket (never stdout); Prometheus figures reach `consume`'s
        # endpoint through PROMETHEUS_MULTIPROC_DIR, which it sets for the daemon.
        telemetry.publish_emf(settings.metrics, process="consumer")
    except (SettingsError, compose.SetupMissingError, telemetry.EmfSinkError) as refused:
        sys.stderr.write(f"entitlements.child: {refused}\n")
        raise SystemExit(2) from None
    kcl.KCLProcess(KclRecordProcessor(consumer)).run()


if __name__ == "__main__":
    main()
