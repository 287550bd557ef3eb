"""analytics/lake/landing.py: the LakeHandler lands typed events and outcomes, flushing whole files."""

from __future__ import annotations

import os
import threading
from datetime import UTC, datetime, timedelta

import msgspec
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from analytics.lake import CHANGES, Lake, LakeHandler, changes_schema, default_allow_list
from analytics.lake._commits import TableCommits
from analytics.lake._delta import open_table
from analytics.lake._schema import OUTCOMES
from analytics.lake.purge import purge_users
from analytics.lake.views import connect
from config import LakeSettings
from schema.errors import RetryableError
from schema.outcomes import OutcomeKind
from tests.analytics.lake.delta_files import data_files
from tests.analytics.lake.delta_files import rows as _rows
from tests.analytics.lakesim import CANARY, SECRET_NOTE, TableSim, final_outcome


def test_every_event_becomes_one_row_with_typed_old_and_new_columns(lake: Lake, history: TableSim) -> None:
    handler = LakeHandler(lake)
    for event in history.events:
        handler.add(event)
    handler.flush()
    con = connect(lake)
    assert con.execute("SELECT count(*) FROM raw_changes").fetchall() == [(len(history.events),)]
    status_change = next(e for e in history.events if e.event_type == "entitlement.status_changed")
    row = con.execute(
        "SELECT old_status, new_status, new_array_account_id, item_kind, user_id, change_kind, sequence_key,"
        " sequence_number, has_old_image, has_new_image FROM changes WHERE event_id = ?",
        [status_change.event_id],
    ).fetchall()
    assert row == [
        (
            status_change.old_item.status,  # type: ignore[union-attr]
            status_change.new_item.status,  # type: ignore[union-attr]
            status_change.new_item.arrayAccountId,  # type: ignore[union-attr]
            "entitlement",
            status_change.user_id,
            "MODIFY",
            status_change.position.sequence_number.rjust(48, "0"),
            status_change.position.sequence_number,
            True,
            True,
        )
    ]


def test_files_carry_the_explicit_schema_and_zstd(lake: Lake, history: TableSim) -> None:
    handler = LakeHandler(lake)
    for event in history.events[:50]:
        handler.add(event)
    handler.flush()
    expected = changes_schema(default_allow_list())
    for path in data_files(lake, CHANGES):
        metadata = pq.read_metadata(lake.path(path))
        assert metadata.schema.to_arrow_schema().equals(expected)
        assert metadata.row_group(0).column(0).compression == "ZSTD"


def test_partitions_are_the_utc_date_of_the_stream_creation_time(lake: Lake, history: TableSim) -> None:
    handler = LakeHandler(lake)
    for event in history.events:
        handler.add(event)
    handler.flush()
    con = connect(lake)
    mismatched = con.execute(
        "SELECT count(*) FROM raw_changes WHERE event_date <> CAST(created_at AT TIME ZONE 'UTC' AS DATE)"
    ).fetchall()
    days = con.execute("SELECT count(DISTINCT event_date) FROM raw_changes").fetchall()
    assert mismatched == [(0,)]
    assert days[0][0] >= 2


def test_flush_writes_everything_buffered_however_little(lake: Lake, history: TableSim) -> None:
    handler = LakeHandler(lake, LakeSettings(flush_rows=10_000, flush_seconds=3600))
    handler.add(history.events[0])
    assert _rows(lake, CHANGES) == 0
    handler.flush()
    assert _rows(lake, CHANGES) == 1
    assert handler.buffered == 0


def test_a_full_buffer_is_written_without_waiting_for_flush(lake: Lake, history: TableSim) -> None:
    handler = LakeHandler(lake, LakeSettings(flush_rows=25, flush_seconds=3600))
    for event in history.events[:60]:
        handler.add(event)
    assert _rows(lake, CHANGES) == 50
    assert handler.buffered == 10


def test_the_oldest_buffered_row_reaching_the_interval_triggers_a_write(
    lake: Lake, history: TableSim
) -> None:
    now = [0.0]
    handler = LakeHandler(lake, LakeSettings(flush_rows=10_000, flush_seconds=30), monotonic=lambda: now[0])
    handler.add(history.events[0])
    now[0] = 29.0
    handler.add(history.events[1])
    assert _rows(lake, CHANGES) == 0
    now[0] = 30.0
    handler.add(history.events[2])
    assert _rows(lake, CHANGES) == 3


def test_a_flush_is_one_commit_per_table_it_touches(lake: Lake, history: TableSim) -> None:
    handler = LakeHandler(lake)
    handler.add(history.events[0])
    handler.add_outcome(history.outcomes[0])
    handler.flush()  # the tables exist from here on
    for event in history.events[1:]:  # several days: several partitions, one commit
        handler.add(event)
    for outcome in history.outcomes[1:]:
        handler.add_outcome(outcome)
    before = {name: _version(lake, name) for name in (CHANGES, OUTCOMES)}
    handler.flush()
    assert {name: _version(lake, name) for name in (CHANGES, OUTCOMES)} == {
        name: version + 1 for name, version in before.items()
    }
    assert len({path.split("/")[1] for path in data_files(lake, CHANGES)}) >= 2


def _version(lake: Lake, table: str) -> int:
    delta = open_table(lake, table)
    return -1 if delta is None else int(delta.version())


def test_a_retried_batch_is_dropped_as_a_replay_and_the_table_holds_each_event_once(
    lake: Lake, history: TableSim
) -> None:
    for _ in range(2):
        handler = LakeHandler(lake)
        for event in history.events[:40]:
            handler.add(event)
        handler.flush()
    assert _rows(lake, CHANGES) == 40
    assert handler.stats.replays_dropped == 40
    assert connect(lake).execute("SELECT count(*) FROM changes").fetchall() == [(40,)]


def test_an_event_added_twice_before_a_flush_lands_once(lake: Lake, history: TableSim) -> None:
    handler = LakeHandler(lake)
    for event in [*history.events[:10], *history.events[:10]]:
        handler.add(event)
    handler.flush()
    assert _rows(lake, CHANGES) == 10
    assert handler.stats.duplicates_skipped == 10


def test_a_failed_write_raises_retryable_and_keeps_the_buffer(
    lake: Lake, history: TableSim, monkeypatch: pytest.MonkeyPatch
) -> None:
    handler = LakeHandler(lake)
    for event in history.events[:20]:
        handler.add(event)
    calls = {"n": 0}
    real = TableCommits._write

    def failing(self: TableCommits, dataset: str, pending: object) -> tuple[int, int]:
        calls["n"] += 1
        if calls["n"] == 1:
            raise OSError("disk full")
        return real(self, dataset, pending)  # type: ignore[arg-type]

    monkeypatch.setattr(TableCommits, "_write", failing)
    with pytest.raises(RetryableError):
        handler.flush()
    assert handler.buffered == 20
    handler.flush()
    assert _rows(lake, CHANGES) == 20
    assert handler.buffered == 0


def test_discard_pending_forgets_unwritten_events_but_keeps_outcomes(lake: Lake, history: TableSim) -> None:
    handler = LakeHandler(lake)
    for event in history.events[:5]:
        handler.add(event)
    handler.add_outcome(history.outcomes[0])
    handler.discard_pending()
    handler.flush()
    assert _rows(lake, CHANGES) == 0
    assert _rows(lake, OUTCOMES) == 1


def test_outcomes_land_in_their_own_dataset_once_through_the_same_flush(
    lake: Lake, history: TableSim
) -> None:
    handler = LakeHandler(lake)
    for outcome in [*history.outcomes, *history.outcomes]:
        handler.add_outcome(outcome)
    handler.add(history.events[0])
    handler.flush()
    assert _rows(lake, OUTCOMES) == len(history.outcomes)
    con = connect(lake)
    rows = con.execute("SELECT count(*), count(user_id), count(source_sequence_key) FROM outcomes").fetchall()
    assert rows == [(len(history.outcomes),) * 3]


def test_no_temporary_files_are_left_behind(lake: Lake, history: TableSim) -> None:
    handler = LakeHandler(lake, LakeSettings(flush_rows=7))
    for event in history.events:
        handler.add(event)
    handler.flush()
    leftovers = [name for _, _, names in os.walk(lake.base) for name in names if name.endswith(".tmp")]
    assert leftovers == []


def test_string_and_millisecond_ttls_stay_visible(lake: Lake) -> None:
    sim = TableSim(seed=3)
    sim.signup("u1", "a1")
    sim.cancel("u1", ttl="1767225600")
    sim.signup("u2", "a2")
    sim.cancel("u2", ttl=1767225600000)
    handler = LakeHandler(lake)
    for event in sim.events:
        handler.add(event)
    handler.flush()
    rows = (
        connect(lake)
        .execute("SELECT user_id, ttl, ttl_raw, ttl_type, expires_at FROM cleanup_records ORDER BY user_id")
        .fetchall()
    )
    assert rows == [
        ("u1", None, "1767225600", "S", None),
        ("u2", 1767225600000, "1767225600000", "N", None),
    ]


def test_a_well_formed_ttl_reads_as_an_expiry_instant(lake: Lake) -> None:
    sim = TableSim(seed=4)
    sim.signup("u1", "a1")
    sim.cancel("u1", ttl=1767225600)
    handler = LakeHandler(lake)
    for event in sim.events:
        handler.add(event)
    handler.flush()
    rows = connect(lake).execute("SELECT epoch(expires_at)::BIGINT FROM cleanup_records").fetchall()
    assert rows == [(1767225600,)]


def test_naive_times_are_taken_as_utc(lake: Lake) -> None:
    sim = TableSim(seed=5, start=datetime(2026, 3, 1, 23, 59, tzinfo=UTC), step=timedelta(seconds=1))
    sim.signup("u1", "a1")
    event = msgspec.structs.replace(sim.events[0], created_at=datetime(2026, 3, 1, 23, 59, 30))
    handler = LakeHandler(lake)
    handler.add(event)
    handler.flush()
    assert [path.rsplit("/", 1)[0] for path in data_files(lake, CHANGES)] == ["changes/event_date=2026-03-01"]


def test_no_processor_token_or_unlisted_attribute_lands_anywhere(lake: Lake, history: TableSim) -> None:
    handler = LakeHandler(lake, LakeSettings(flush_rows=50))
    for event in history.events:
        handler.add(event)
    for outcome in history.outcomes:
        handler.add_outcome(outcome)
    handler.flush()
    tokens = [e for e in history.events if e.new_item is not None and "processorToken" in repr(e.new_item)]
    assert tokens, "the history must carry processor tokens for this test to mean anything"
    files = [os.path.join(d, n) for d, _, names in os.walk(lake.base) for n in names]
    assert any(f.endswith(".parquet") for f in files)
    for path in files:
        raw = open(path, "rb").read()  # noqa: SIM115
        assert CANARY.encode() not in raw and SECRET_NOTE.encode() not in raw
        assert b"processorToken" not in raw and b"internalNote" not in raw
        if path.endswith(".parquet"):
            text = repr(pq.read_table(path).to_pylist())
            assert CANARY not in text and SECRET_NOTE not in text
            uncompressed = pq.read_table(path)
            sink = pa.BufferOutputStream()
            pq.write_table(uncompressed, sink, compression="none")
            assert CANARY.encode() not in sink.getvalue().to_pybytes()


def _raw_outcomes(lake: Lake) -> list[tuple[str, str]]:
    con = connect(lake, views=["raw_outcomes"])
    try:
        rows = con.execute("SELECT outcome_id, kind FROM raw_outcomes ORDER BY kind").fetchall()
    finally:
        con.close()
    return [(str(identity), str(kind)) for identity, kind in rows]


def test_a_replays_final_outcome_is_dropped_and_the_first_one_committed_stands(lake: Lake) -> None:
    deleted = final_outcome(OutcomeKind.CLEANUP_DELETED, minute=0)
    already = final_outcome(OutcomeKind.CLEANUP_ALREADY_DELETED, minute=1)
    for outcome in (deleted, already):  # two processes: the first, then its crash replay
        handler = LakeHandler(lake)
        handler.add_outcome(outcome)
        handler.flush()
    assert handler.stats.replays_dropped == 1
    assert _raw_outcomes(lake) == [(deleted.outcome_id, "cleanup.deleted")]


def test_of_two_final_outcomes_of_one_expiry_in_one_buffer_the_preferred_one_is_written(lake: Lake) -> None:
    handler = LakeHandler(lake)
    handler.add_outcome(final_outcome(OutcomeKind.CLEANUP_ALREADY_DELETED, minute=0, attempt=1))
    handler.add_outcome(final_outcome(OutcomeKind.CLEANUP_DELETED, minute=1))
    handler.add_outcome(final_outcome(OutcomeKind.CLEANUP_REFUSED_BY_GUARD, minute=2))
    handler.flush()
    [(_, kind)] = _raw_outcomes(lake)
    assert kind == "cleanup.deleted"


def test_a_handler_lands_on_after_an_erasure_cleaned_the_log_it_had_read(
    lake: Lake, history: TableSim
) -> None:
    kept = [e for e in history.events if e.user_id != "u001"]
    first, other = LakeHandler(lake), LakeHandler(lake)
    for event in kept[:100]:
        first.add(event)
    first.flush()
    for event in kept[100:150]:
        other.add(event)
    other.flush()
    purge_users(lake, ["u001"])  # its clean-up deletes the log entries `first` read
    for event in kept[150:]:
        first.add(event)
    first.flush()
    assert connect(lake).execute("SELECT count(*) FROM changes").fetchall() == [(len(kept),)]


def test_a_handler_flushing_while_erasures_purge_beside_it_fails_no_flush_and_loses_nothing(
    any_lake: Lake, history: TableSim
) -> None:
    erased = ["u001", "u002", "u003"]
    before = LakeHandler(any_lake)
    for event in history.events:
        if event.user_id in erased:
            before.add(event)
    before.flush()
    kept = [e for e in history.events if e.user_id not in erased]
    failures: list[BaseException] = []
    landing_done = threading.Event()

    per_flush = 4 if any_lake.is_local else 60  # moto's S3 makes each commit slow: fewer, larger

    def land() -> None:
        handler = LakeHandler(any_lake, LakeSettings(flush_rows=10_000))
        try:
            for start in range(0, len(kept), per_flush):
                for event in kept[start : start + per_flush]:
                    handler.add(event)
                handler.flush()  # one commit of `changes` each time: many chances to meet a clean-up
        except BaseException as error:  # the test reports it
            failures.append(error)
        finally:
            landing_done.set()

    def erase() -> None:
        try:
            for user in erased:
                purge_users(any_lake, [user])
            number = 0
            while not landing_done.is_set():  # more clean-ups (an id that holds nothing) until landed
                purge_users(any_lake, [f"nobody-{number}"])
                number += 1
        except BaseException as error:  # the test reports it
            failures.append(error)

    threads = [threading.Thread(target=land), threading.Thread(target=erase)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    con = connect(any_lake)
    assert con.execute("SELECT count(*) FROM raw_changes").fetchall() == [(len(kept),)]
    assert con.execute("SELECT count(*) FROM changes").fetchall() == [(len(kept),)]
