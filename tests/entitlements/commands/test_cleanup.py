"""entitlements/commands/cleanup.py (its commands on moto: tests/processors/cleanup/)."""

from __future__ import annotations

from entitlements.commands.cleanup import DEFAULT_QUEUE
from processors.cleanup import DEFAULT_RETRY_QUEUE_NAME


def test_the_queue_named_in_help_is_the_processors_default_retry_queue() -> None:
    assert DEFAULT_QUEUE == DEFAULT_RETRY_QUEUE_NAME
