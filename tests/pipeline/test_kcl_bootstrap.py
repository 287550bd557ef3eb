"""Through the real daemon: a table whose items were written before its stream was enabled is bootstrapped
from a point-in-time export taken while writes race it, and consumed by the running consumer; the lake's
current state and every now-audit then equal those of the table's own direct Scan (issue 24)."""

from __future__ import annotations

import random
import threading
import time
from pathlib import Path

import pytest

from analytics.lake import lake_from_settings
from config import Settings
from entitlements.compose import setup_retry_queues
from schema.table import EntitlementStatus, cancellation_key
from schema.table_writes import cancellation_record, entitlement_row
from tests.analytics.lake.test_bootstrap import (
    NOW,
    Stack,
    _landed_identities,
    _now_audits,
    _state,
    lake_of_the_table,
    small_files,
    stack,
    write_history,
)
from tests.support.kcl import RunningConsumer, consumer_settings, stream_contents
from tests.support.lake import query_lake
from tests.support.polling import wait_for

__all__ = ["small_files", "stack"]  # fixtures shared with the bootstrap's library tests

pytestmark = pytest.mark.kcl

USERS = 40


class Racer:
    """Writes of every kind the service makes, in a thread, until stopped (the export races them)."""

    def __init__(self, stack: Stack, seed: int) -> None:
        self._stack = stack
        self._rng = random.Random(seed)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"racer-{seed}")
        self._seed = seed
        self.writes = 0

    def _run(self) -> None:
        while not self._stop.is_set():
            user = self._rng.randrange(USERS)
            choice = self._rng.random()
            if choice < 0.4:
                status = self._rng.choice(list(EntitlementStatus))
                self._stack.set_status(f"u{user}", f"a{user}", status)
            elif choice < 0.7:
                name = f"r{self._seed}-{self.writes}"
                self._stack.put(entitlement_row(name, f"b{name}", now=NOW))
            else:
                self._stack.delete(cancellation_key(f"u{user}"))
            self.writes += 1
            time.sleep(0.01)

    def __enter__(self) -> Racer:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()


def _landed_sequences(settings: Settings, stream_arn: str) -> set[str]:
    # raw_changes: every landed row, duplicates kept, as the daemon wrote them (none until its first commit).
    rows = query_lake(settings, "SELECT sequence_number FROM raw_changes WHERE stream_arn = ?", [stream_arn])
    return {str(number) for (number,) in rows}


def test_a_bootstrapped_table_consumed_by_the_daemon_equals_the_tables_scan(
    stack: Stack, moto_endpoint: str, tmp_path: Path, small_files: None
) -> None:
    write_history(stack, USERS)  # no stream yet: only the export can bring these items
    stack.enable_stream()
    settings = consumer_settings(moto_endpoint, stack.table_name, tmp_path / "state")
    setup_retry_queues(settings)
    consumer = RunningConsumer(settings=settings, stream_arn=stack.stream_arn, daemons={})
    consumer.start_worker("worker-1")  # it starts up while the export is taken and landed
    lake = lake_from_settings(settings)
    try:
        # Changes the stream holds from before the export: they are in the export too.
        stack.set_status("u2", "a2", EntitlementStatus.CANCELLED)
        stack.put(cancellation_record("u2", "a2", ttl=1_800_000_000, now=NOW))
        stack.delete(cancellation_key("u5"))  # a reactivation: the record goes, the row comes back
        stack.set_status("u5", "a5", EntitlementStatus.ACTIVE)
        stack.enable_recovery()
        with Racer(stack, seed=7) as before:
            time.sleep(0.3)
            manifest = stack.export()  # writes go on while the export is taken and written
            time.sleep(0.3)
        assert before.writes > 0 and len(manifest.files) > 1
        with Racer(stack, seed=8) as during:  # and while it is landed, beside the consumer's commits
            report = stack.bootstrap(manifest, lake, lake_settings=settings.lake)
        assert report.items_landed == manifest.item_count
        assert during.writes > 0

        streamed = {r["dynamodb"]["SequenceNumber"] for r in stream_contents(moto_endpoint, stack.stream_arn)}
        wait_for(lambda: _landed_sequences(settings, stack.stream_arn) >= streamed, timeout=240)
    finally:
        consumer.stop_all()

    exported = (manifest.item_count, manifest.item_count)
    assert _landed_identities(lake, manifest.export_arn) == exported  # each exported item once
    table_lake = lake_of_the_table(stack, tmp_path / "table")
    assert _state(lake) == _state(table_lake)
    audits = _now_audits(lake)
    assert audits == _now_audits(table_lake)
    assert audits["duplicate_active_rows"]  # the planted fault from before the stream is seen
