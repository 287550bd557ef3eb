"""The account's copies outside the table: the consumer's quarantine and parked work (raw stream
records), and the lake through the analytics adapter (mask at once, purge in one rewrite per file,
holdings that say when a part cannot be read)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from analytics import Lake, LakeHandler, connect
from analytics.lake.eraser import AnalyticsLakeEraser
from pipeline.parking import ParkedWork, RawRecord
from pipeline.quarantine import Quarantine
from processors.erasure import ConsumerStores
from schema.outcomes import OutcomeEvent, OutcomeKind, outcome_id
from tests.analytics.lake.delta_files import data_files
from tests.processors.erasure.test_record_match import ARN, record

SHARD = "shardId-00000001700000000000-copies"


def _adapter_record(user_id: str, sequence: str) -> bytes:
    return record(user_id, event_id=f"ev-{sequence}", sequence_number=sequence)


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path]:
    return tmp_path / "quarantine", tmp_path / "parked"


def test_a_parked_batch_is_rewritten_without_the_accounts_records(dirs: tuple[Path, Path]) -> None:
    quarantine_dir, parked_dir = dirs
    records = [
        RawRecord(_adapter_record("keep-1", "100"), "100"),
        RawRecord(_adapter_record("gone", "200"), "200"),
        RawRecord(_adapter_record("keep-2", "300"), "300"),
    ]
    ParkedWork(parked_dir).park(handler="lake", stream_arn=ARN, shard_id=SHARD, records=records, reason="r")
    counts = ConsumerStores(quarantine_dir, parked_dir, parked_dir.parent / "dead-letter").erase(["gone"])
    assert (counts.parked_records_removed, counts.parked_files_changed) == (1, 1)
    [batch] = list(ParkedWork(parked_dir))
    assert [record.sequence_number for record in batch.records] == ["100", "300"]
    assert (batch.handler, batch.stream_arn, batch.shard_id, batch.reason) == ("lake", ARN, SHARD, "r")


def test_a_parked_batch_of_the_account_only_is_removed(dirs: tuple[Path, Path]) -> None:
    quarantine_dir, parked_dir = dirs
    records = [
        RawRecord(_adapter_record("gone", "100"), "100"),
        RawRecord(_adapter_record("gone", "200"), "200"),
    ]
    ParkedWork(parked_dir).park(handler="lake", stream_arn=ARN, shard_id=SHARD, records=records, reason="r")
    ConsumerStores(quarantine_dir, parked_dir, parked_dir.parent / "dead-letter").erase(["gone"])
    assert ParkedWork(parked_dir).count() == 0


def test_a_quarantined_record_that_never_decoded_is_found_by_its_bytes(dirs: tuple[Path, Path]) -> None:
    quarantine_dir, parked_dir = dirs
    quarantine = Quarantine(quarantine_dir)
    quarantine.put(
        raw=b'{"pk": "USER#gone", "broken', reason="r", stream_arn=ARN, shard_id=SHARD, sequence_number="1"
    )
    quarantine.put(raw=b"\x00\x01 not json", reason="r", stream_arn=ARN, shard_id=SHARD, sequence_number="2")
    quarantine.put(
        raw=_adapter_record("keep", "3"), reason="r", stream_arn=ARN, shard_id=SHARD, sequence_number="3"
    )
    stores = ConsumerStores(quarantine_dir, parked_dir, parked_dir.parent / "dead-letter")
    assert stores.holds("gone")
    assert stores.erase(["gone"]).quarantined_removed == 1
    assert quarantine.count() == 2 and not stores.holds("gone") and stores.holds("keep")


def test_erasing_nobody_or_twice_changes_nothing(dirs: tuple[Path, Path]) -> None:
    quarantine_dir, parked_dir = dirs
    ParkedWork(parked_dir).park(
        handler="lake",
        stream_arn=ARN,
        shard_id=SHARD,
        records=[RawRecord(_adapter_record("a", "1"), "1")],
        reason="r",
    )
    stores = ConsumerStores(quarantine_dir, parked_dir, parked_dir.parent / "dead-letter")
    assert stores.erase([]).parked_records_removed == 0
    assert stores.erase(["a"]).parked_records_removed == 1
    assert stores.erase(["a"]).parked_records_removed == 0


def _land_outcomes(lake: Lake, *user_ids: str) -> None:
    handler = LakeHandler(lake)
    for user_id in user_ids:
        handler.add_outcome(
            OutcomeEvent(
                outcome_id=outcome_id(f"x-{user_id}", OutcomeKind.CLEANUP_DELETED),
                kind=OutcomeKind.CLEANUP_DELETED,
                occurred_at=datetime(2026, 1, 1, tzinfo=UTC),
                user_id=user_id,
                array_account_id="arr",
            )
        )
    handler.flush()


def test_the_mask_hides_the_account_from_the_views_at_once_and_unmask_forgets_it(
    lake: Lake, lake_eraser: AnalyticsLakeEraser
) -> None:
    _land_outcomes(lake, "gone", "kept")
    lake_eraser.mask(["gone"])
    con = lake_eraser.connect()
    assert con.execute("SELECT user_id FROM outcomes").fetchall() == [("kept",)]
    assert lake_eraser.masked_users() == {"gone"}
    lake_eraser.unmask(["gone"])
    assert lake_eraser.masked_users() == frozenset()


def test_purge_deletes_the_accounts_rows_and_holds_follows(
    lake: Lake, lake_eraser: AnalyticsLakeEraser
) -> None:
    _land_outcomes(lake, "gone", "kept")
    assert lake_eraser.holds("gone") is True
    assert lake_eraser.purge(["gone"])["gone"]["outcomes"] == 1
    assert lake_eraser.holds("gone") is False and lake_eraser.holds("kept") is True
    assert connect(lake).execute("SELECT count(*) FROM outcomes WHERE user_id = 'gone'").fetchone() == (0,)


def test_holds_cannot_answer_when_a_lake_file_cannot_be_read(
    lake: Lake, lake_eraser: AnalyticsLakeEraser
) -> None:
    _land_outcomes(lake, "kept")
    broken = Path(lake.base) / data_files(lake, "outcomes")[0]  # a file the table's log names
    broken.write_bytes(b"not parquet at all")
    assert lake_eraser.holds("gone") is None
