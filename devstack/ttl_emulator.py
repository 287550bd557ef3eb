"""A TTL emulator for moto's DynamoDB that behaves as AWS's TTL does.

moto never expires items and never sets `userIdentity` on stream records. This emulator, running in the
SAME process as the moto server, periodically deletes, from every moto DynamoDB table that has TTL
enabled, the items whose TTL attribute has passed by the shared clock (`schema.clock`), under AWS's rules:

- the attribute must be a top-level Number (type `N`) holding integral epoch seconds; a string, a
  fractional number or any other type is never acted on (as `schema.table.CleanupRecord.ttl_epoch_seconds`
  reads it);
- it has passed when it is strictly less than now; a value in milliseconds lies tens of thousands of years
  ahead, so it never passes;
- a value more than five years in the past is never acted on.

Each deletion reaches the table's stream as AWS TTL deletions do: a REMOVE record carrying
`userIdentity: {"PrincipalId": "dynamodb.amazonaws.com", "Type": "Service"}`. Deletions made through the
API carry no identity. moto's GetRecords serialiser writes the record's `userIdentity` member with the
`Identity` shape of the botocore service model, so boto3 sees `Records[].userIdentity.PrincipalId/Type`,
and the Java SDK behind the KCL adapter deserialises the same wire JSON (which the adapter then renders
as `userIdentity: {principalId, type}` for the multilang child).

A pass costs what is due, not the size of the table: it reads only the keys of each table's TTL index
(`devstack._moto_patches.ttl_index`: integral epoch seconds -> keys, built by one scan the first time a
pass needs it, then kept up to date by hooks on every put and update) whose time has passed, and checks
each against the live item by the rules above before deleting it.

How it hooks moto, and what it relies on (moto[server]==5.2.5 is pinned in pyproject.toml;
`check_moto_supported` refuses any other version; every patch of moto's internals, the TTL index and
the stream identity hook included, lives in `devstack._moto_patches`):

- `moto.dynamodb.models.dynamodb_backends.iter_backends()` lists the live (account, region) backends;
  each backend's `tables` dict holds `Table` objects whose `ttl` dict has `TimeToLiveStatus` and
  `AttributeName`, and whose `items` map hash key -> range key -> `Item` (with `attrs` of `DynamoType`
  having `.type` and `.value`, the value of an `N` being its decimal string).
- `Table.delete_item(hash_key, range_key)` removes an item without a condition and appends one record to
  the stream through `StreamShard.add(old, None)`.
- `StreamShard.add` is wrapped (once, process-wide, `install_stream_identity_hook`): while the emulator
  deletes (`as_ttl_service`), records appended by the call get `record["userIdentity"]` set on their
  `StreamRecord.record` dict, which GetRecords returns.
  A record handed to a Lambda event-source mapping inside `add` (moto clears the shard then) is not
  marked: this project uses none.
- Deletions hold `lock`, the same lock `devstack.moto_server.MotoServer` holds around every DynamoDB and
  Streams request, so an item cannot change between the expiry check and its deletion.
"""

from __future__ import annotations

__all__ = [
    "FIVE_YEARS",
    "TTL_IDENTITY",
    "TtlEmulator",
    "UnsupportedMotoVersion",
    "check_moto_supported",
    "install_stream_identity_hook",
    "ttl_expired",
]

import logging
import threading
from collections.abc import Collection
from datetime import timedelta
from decimal import Decimal, InvalidOperation
from typing import Any

from moto.dynamodb.models import dynamodb_backends
from moto.dynamodb.models.dynamo_type import Item
from moto.dynamodb.models.table import Table

from devstack._moto_patches import (
    TTL_IDENTITY,
    UnsupportedMotoVersion,
    as_ttl_service,
    check_moto_supported,
    install_stream_identity_hook,
    install_ttl_index,
    ttl_index,
)
from schema.clock import Clock

_log = logging.getLogger(__name__)

FIVE_YEARS = timedelta(days=5 * 365)


def ttl_expired(attribute: dict[str, Any] | None, now_epoch_seconds: int) -> bool:
    """Whether DynamoDB's TTL would delete an item whose TTL attribute is `attribute` (a low-level
    AttributeValue such as {"N": "1767225600"}) at `now_epoch_seconds`."""
    if not attribute or set(attribute) != {"N"}:
        return False
    raw = attribute["N"]
    if not isinstance(raw, str):
        return False
    try:
        value = Decimal(raw)
    except InvalidOperation:
        return False
    if not value.is_finite() or value != value.to_integral_value():
        return False
    seconds = int(value)
    oldest = now_epoch_seconds - int(FIVE_YEARS.total_seconds())
    return oldest <= seconds < now_epoch_seconds


def _ttl_attribute_name(table: Table) -> str | None:
    spec = table.ttl
    if spec.get("TimeToLiveStatus") != "ENABLED":
        return None
    name = spec.get("AttributeName")
    return name if isinstance(name, str) and name else None


def _low_level(item: Item, attribute_name: str) -> dict[str, Any] | None:
    value = item.attrs.get(attribute_name)
    if value is None:
        return None
    return {value.type: value.value}


class TtlEmulator:
    """Deletes expired items from every moto DynamoDB table in this process, as AWS's TTL would.

    `run_once()` does one pass and returns how many items it deleted (tests call it directly);
    `start()` runs passes every `interval_seconds` on a daemon thread until `stop()`. `table_names`
    limits it to those tables (default: every table, as AWS does for each table with TTL enabled).
    """

    def __init__(
        self,
        clock: Clock,
        *,
        interval_seconds: float = 1.0,
        lock: threading.RLock | None = None,
        table_names: Collection[str] | None = None,
    ) -> None:
        if interval_seconds <= 0:
            raise ValueError("interval_seconds must be positive")
        install_stream_identity_hook()
        install_ttl_index()
        self._clock = clock
        self._interval = interval_seconds
        self._lock = lock if lock is not None else threading.RLock()
        self._only = frozenset(table_names) if table_names is not None else None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.deleted_total = 0
        self.passes = 0

    def _tables(self) -> list[Table]:
        # Plain dict views: they list only backends already created, and create none.
        return [
            table
            for account_backends in list(dynamodb_backends.values())
            for backend in list(account_backends.values())
            for table in list(backend.tables.values())
            if self._only is None or table.name in self._only
        ]

    def run_once(self) -> int:
        """One pass over every table; returns how many items it deleted."""
        now = int(self._clock.now().timestamp())
        deleted = 0
        # One lock for the whole pass: the index, the items and the deletions are read and made without
        # any request in between.
        with self._lock:
            for table in self._tables():
                attribute_name = _ttl_attribute_name(table)
                if attribute_name is None:
                    continue
                with as_ttl_service():
                    for hash_key, range_key in ttl_index(table, attribute_name).pop_due(now):
                        item = table.get_item(hash_key, range_key)
                        # Checked on the live item: it may be gone, or carry a later TTL since.
                        if item is None or not ttl_expired(_low_level(item, attribute_name), now):
                            continue
                        if table.delete_item(hash_key, range_key) is not None:
                            deleted += 1
        self.deleted_total += deleted
        self.passes += 1
        if deleted:
            _log.info("ttl emulator deleted expired items", extra={"deleted": deleted})
        return deleted

    def _loop(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self.run_once()
            except Exception as error:  # a failed pass is logged and retried on the next one
                _log.error("ttl emulator pass failed", extra={"error": type(error).__name__})

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="ttl-emulator", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def __enter__(self) -> TtlEmulator:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
