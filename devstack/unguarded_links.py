"""Fault injection for `entitlements simulate` and the demo only: the link write without its guard.

`UnguardedLinkTable` stands in for the table arraylink reads and writes through
(`entitlements.compose.service_parts(link_table=...)`): it reads the Active row as the service does, but
writes it back with an **unconditional** whole-item put instead of SaveIfActive. That is the harm the service
design's "Array Link Writes" warns of (docs/table.md), made real: a row retired (Superseded) or removed during
the link's two network calls is put back Active beside the user's newer row, while the stale cleanup record
still names its account. The audits must find every such write (`stale_write`, `duplicate_active_rows_ever`).

Every put asks for the item it replaced (`ReturnValues=ALL_OLD`), so the wrapper counts what it
overwrote, by the status the row had: `overwritten` (Superseded or Removed turned Active again: what the
`stale_write` audit counts), `overwritten_cancelled` (a Cancelled row turned Active beside its
cancellation record), `recreated` (the row was gone), `unchanged` (still Active: the put changed nothing
and, with stream fidelity, wrote no stream record).

It is never a setting of `entitlements serve`. `unguarded_link_table(settings, table)` refuses
(`FaultInjectionRefused`) unless every endpoint the service would reach is loopback: AWS (every service's
endpoint), Array, transactions-service and the service's own bind address.
"""

from __future__ import annotations

__all__ = [
    "FaultInjectionRefused",
    "UnguardedLinkTable",
    "assert_all_loopback",
    "unguarded_link_table",
]

import threading
from typing import Any, Protocol
from urllib.parse import urlsplit

from config import Settings
from devstack._fake_http import is_loopback
from schema.aws_errors import converted
from schema.errors import TerminalError

_AWS_SERVICES = ("dynamodb", "streams", "sqs", "sns", "s3", "cloudwatch")


class FaultInjectionRefused(TerminalError):
    """The unguarded link write was asked for where an endpoint is not loopback."""


class _Table(Protocol):
    table_name: str

    def active_row(self, user_id: str) -> dict[str, Any]: ...


def _host(url: str | None) -> str | None:
    if not url:
        return None
    return urlsplit(url).hostname


def assert_all_loopback(
    settings: Settings, *, purpose: str = "unguarded link writes are for the local stack only"
) -> None:
    """Raise `FaultInjectionRefused` unless AWS, Array, transactions-service and the service are all on
    loopback. The message names the endpoint's role, never its address."""
    roles: dict[str, str | None] = {
        f"aws.{service}": _host(settings.aws.endpoint(service)) for service in _AWS_SERVICES
    }
    roles["array.base_url"] = _host(settings.array.base_url)
    roles["service.transactions_base_url"] = _host(settings.service.transactions_base_url)
    roles["service.host"] = settings.service.host
    for role, host in roles.items():
        if host is None or not is_loopback(host):
            raise FaultInjectionRefused(f"{purpose}: {role} is not loopback")


class UnguardedLinkTable:
    """arraylink's table with SaveIfActive replaced by an unconditional put (see the module docstring).
    Thread-safe."""

    def __init__(self, table: _Table, client: Any) -> None:
        self._table = table
        self._client = client
        self._lock = threading.Lock()
        self.counts: dict[str, int] = {
            "overwritten": 0,
            "overwritten_cancelled": 0,
            "recreated": 0,
            "unchanged": 0,
        }

    def active_row(self, user_id: str) -> dict[str, Any]:
        return self._table.active_row(user_id)

    def save_if_active(self, image: dict[str, Any]) -> None:
        """The unguarded write: put `image` back whatever the row became; count what it replaced."""
        with converted("DynamoDB PutItem"):
            answer = self._client.put_item(
                TableName=self._table.table_name, Item=image, ReturnValues="ALL_OLD"
            )
        old = answer.get("Attributes")
        status = old.get("status", {}).get("S") if old else None
        if old is None:
            kind = "recreated"
        elif status in ("Superseded", "Removed"):
            kind = "overwritten"
        elif status == "Cancelled":
            kind = "overwritten_cancelled"
        else:
            kind = "unchanged"
        with self._lock:
            self.counts[kind] += 1

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return dict(self.counts)


def unguarded_link_table(settings: Settings, table: _Table, client: Any) -> UnguardedLinkTable:
    """The wrapper, refused unless every endpoint is loopback (`assert_all_loopback`)."""
    assert_all_loopback(settings)
    return UnguardedLinkTable(table, client)
