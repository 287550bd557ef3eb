"""entitlements/commands/cleanup.py (its commands on moto: tests/processors/cleanup/)."""

from __future__ import annotations

import pytest

from entitlements.commands.cleanup import settings_naming_retry_queue


def test_without_the_option_the_retry_queue_is_the_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENTITLEMENTS_CLEANUP__RETRY_QUEUE_NAME", "from-the-environment")
    assert settings_naming_retry_queue(None).cleanup.retry_queue_name == "from-the-environment"


def test_the_option_names_the_retry_queue_and_keeps_the_other_cleanup_settings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ENTITLEMENTS_CLEANUP__MODE", "shadow")
    cleanup = settings_naming_retry_queue("from-the-option").cleanup
    assert (cleanup.retry_queue_name, cleanup.mode) == ("from-the-option", "shadow")
