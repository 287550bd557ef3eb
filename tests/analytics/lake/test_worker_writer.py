"""analytics/lake/worker_writer.py: one writer per worker commits its children's flushes, the ones that
arrive together in one commit per table, each flush answered only once its rows are committed."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from analytics.lake import CHANGES, Lake, LakeHandler
from analytics.lake._commit_report import CommitReport, Pending
from analytics.lake._commits import TableCommits
from analytics.lake._delta import open_table
from analytics.lake._files import ensure_layout
from analytics.lake._schema import default_allow_list
from analytics.lake.worker_writer import WorkerWriter, WorkerWriterClient
from pipeline.events import StreamEvent
from schema.errors import RetryableError
from tests.analytics.lake.delta_files import rows as _rows
from tests.analytics.lakesim import TableSim


@dataclass
class Running:
    writer: WorkerWriter
    address_file: Path
    stop: threading.Event
    thread: threading.Thread

    def child(self, lake: Lake, *, reconnect_seconds: float = 0.0) -> LakeHandler:
        """A child's landing, connected (so the writer waits for its flush as for the others'); by
        default it does not wait for a writer that is gone."""
        client = WorkerWriterClient(self.address_file, reply_timeout=30, reconnect_seconds=reconnect_seconds)
        client.connect()
        return LakeHandler(lake, commits=client)


@contextmanager
def serving(writer: WorkerWriter, address_file: Path) -> Iterator[Running]:
    """`writer` serving on a thread until the block ends."""
    stop = threading.Event()
    thread = threading.Thread(target=writer.serve, args=(stop,), daemon=True)
    thread.start()
    for _ in range(200):
        if address_file.exists():
            break
        threading.Event().wait(0.02)
    try:
        yield Running(writer, address_file, stop, thread)
    finally:
        stop.set()
        thread.join(10)


def serving_quickly(lake: Lake, address_file: Path) -> AbstractContextManager[Running]:
    """A writer with a short gather serving `lake` for a block (one child, or flushes timed apart)."""
    return serving(WorkerWriter(lake, address_file, gather_seconds=0.1), address_file)


@pytest.fixture
def running(lake: Lake, tmp_path: Path) -> Iterator[Running]:
    address_file = tmp_path / "writer.json"
    # A long gather: the test's two flushes are answered together only by the all-children rule.
    with serving(WorkerWriter(lake, address_file, gather_seconds=20.0), address_file) as served:
        yield served


def _by_shard(history: TableSim) -> dict[str, list[StreamEvent]]:
    shards: dict[str, list[StreamEvent]] = {}
    for event in history.events:
        shards.setdefault(event.position.shard_id, []).append(event)
    assert len(shards) == 2
    return shards


def _flush_together(handlers: list[LakeHandler]) -> list[BaseException]:
    errors: list[BaseException] = []

    def flush(handler: LakeHandler) -> None:
        try:
            handler.flush()
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=flush, args=(handler,)) for handler in handlers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return errors


def _changes_version(lake: Lake) -> int:
    table = open_table(lake, CHANGES)
    return -1 if table is None else table.version()


def test_the_flushes_of_two_children_that_arrive_together_are_one_commit(
    lake: Lake, history: TableSim, running: Running
) -> None:
    children = [running.child(lake) for _ in range(2)]
    for child, events in zip(children, _by_shard(history).values(), strict=True):
        for event in events:
            child.add(event)
    ensure_layout(lake, default_allow_list())
    before = _changes_version(lake)
    assert not _flush_together(children)
    assert _changes_version(lake) == before + 1
    assert _rows(lake, CHANGES) == len(history.events)


def test_a_flush_returns_with_its_rows_already_in_the_table(
    lake: Lake, history: TableSim, tmp_path: Path
) -> None:
    address_file = tmp_path / "writer.json"
    with serving_quickly(lake, address_file) as served:
        child = served.child(lake)
        for event in history.events:
            child.add(event)
        child.flush()
        assert _rows(lake, CHANGES) == len(history.events)
        assert child.buffered == 0


def test_the_same_rows_sent_by_two_children_land_once(
    lake: Lake, history: TableSim, running: Running
) -> None:
    # A zombie child whose lease moved flushes what its successor flushes: the commit is planned
    # against the table, so the copy is dropped.
    children = [running.child(lake) for _ in range(2)]
    for child in children:
        for event in history.events:
            child.add(event)
    assert not _flush_together(children)
    assert _rows(lake, CHANGES) == len(history.events)


class _FailsOneShard:
    """Commits like the lake, except any flush holding rows of `shard`, which fails as a disk would."""

    def __init__(self, lake: Lake, shard: str) -> None:
        self._commits = TableCommits(lake, default_allow_list())
        self._shard = shard

    def commit(self, pending: Pending) -> CommitReport:
        for dataset, parts in pending:
            if any(self._shard in part.table["shard_id"].to_pylist() for part in parts):
                return CommitReport(failed=dataset, error="OSError")
        return self._commits.commit(pending)


def test_a_flush_that_cannot_commit_fails_alone_and_the_others_land(
    lake: Lake, history: TableSim, tmp_path: Path
) -> None:
    shards = _by_shard(history)
    bad, good = list(shards)
    address_file = tmp_path / "writer.json"
    writer = WorkerWriter(lake, address_file, gather_seconds=20.0, commits=_FailsOneShard(lake, bad))
    with serving(writer, address_file) as served:
        failing, landing = served.child(lake), served.child(lake)
        for event in shards[bad]:
            failing.add(event)
        for event in shards[good]:
            landing.add(event)
        errors = _flush_together([failing, landing])
        assert [type(error) for error in errors] == [RetryableError]
        assert failing.buffered == len(shards[bad])  # kept for the retry
        assert landing.buffered == 0
        assert _rows(lake, CHANGES) == len(shards[good])


def test_no_writer_is_a_retryable_error_and_the_buffer_is_kept(
    lake: Lake, history: TableSim, tmp_path: Path
) -> None:
    client = WorkerWriterClient(tmp_path / "absent.json", reply_timeout=5, reconnect_seconds=0.5)
    child = LakeHandler(lake, commits=client)
    for event in history.events:
        child.add(event)
    with pytest.raises(RetryableError):
        child.flush()  # after half a second of trying
    assert child.buffered == len(history.events)


def test_a_child_finds_a_restarted_writer_and_its_retry_lands(
    lake: Lake, history: TableSim, tmp_path: Path
) -> None:
    address_file = tmp_path / "writer.json"
    with serving_quickly(lake, address_file) as first:
        child = first.child(lake)
        child.add(history.events[0])
        child.flush()
    for event in history.events[1:]:
        child.add(event)
    with pytest.raises(RetryableError):
        child.flush()  # the writer is gone
    with serving_quickly(lake, address_file):
        child.flush()
        assert _rows(lake, CHANGES) == len(history.events)


def test_a_flush_sent_while_its_writer_restarts_waits_for_the_new_writer_and_lands(
    lake: Lake, history: TableSim, tmp_path: Path
) -> None:
    address_file = tmp_path / "writer.json"
    with serving_quickly(lake, address_file) as first:
        child = first.child(lake, reconnect_seconds=30)
        child.add(history.events[0])
        child.flush()
    # The first writer is gone (its address file with it); the next one comes up a second later, with a
    # new key, while the child's flush is trying to reach a writer.
    restarted = threading.Event()

    def restart() -> None:
        threading.Event().wait(1.0)
        with serving_quickly(lake, address_file):
            restarted.set()
            threading.Event().wait(5.0)

    thread = threading.Thread(target=restart, daemon=True)
    thread.start()
    for event in history.events[1:]:
        child.add(event)
    child.flush()
    assert restarted.is_set()
    assert _rows(lake, CHANGES) == len(history.events)
    thread.join(10)


def test_a_child_with_the_wrong_key_is_refused(
    lake: Lake, history: TableSim, running: Running, tmp_path: Path
) -> None:
    entry = json.loads(running.address_file.read_bytes())
    forged = tmp_path / "forged.json"
    forged.write_text(json.dumps({"address": entry["address"], "key": "00" * 32}))
    child = LakeHandler(lake, commits=WorkerWriterClient(forged, reply_timeout=5, reconnect_seconds=0.5))
    child.add(history.events[0])
    with pytest.raises(RetryableError):
        child.flush()
    assert open_table(lake, CHANGES) is None


def test_the_address_file_is_the_owners_only(running: Running) -> None:
    assert running.address_file.stat().st_mode & 0o077 == 0


def test_flushes_that_arrive_before_the_next_round_may_begin_share_it(
    lake: Lake, history: TableSim, tmp_path: Path
) -> None:
    # No gathering, a round at most every 5 s: children that flush apart (a cohort that started at
    # another moment) are caught by the next round together instead of a commit each.
    address_file = tmp_path / "writer.json"
    writer = WorkerWriter(lake, address_file, gather_seconds=0.0, round_seconds=5.0)
    with serving(writer, address_file) as served:
        first, second = served.child(lake), served.child(lake)
        shards = list(_by_shard(history).values())
        ensure_layout(lake, default_allow_list())
        before = _changes_version(lake)
        first.add(shards[0][0])
        first.flush()  # round 1, alone
        for event in shards[1]:
            second.add(event)
        for event in shards[0][1:]:
            first.add(event)
        later = threading.Thread(target=second.flush)
        later.start()
        threading.Event().wait(0.1)
        first.flush()  # arrives apart from the second's flush, within the gap: round 2 holds both
        later.join(60)
        assert _changes_version(lake) == before + 2
        assert _rows(lake, CHANGES) == len(history.events)
