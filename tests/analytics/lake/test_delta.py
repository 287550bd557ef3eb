"""analytics/lake/_delta.py: a table's creation by concurrent first writers, and commits that survive an
erasure's clean-up of the log."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import deltalake
import pyarrow as pa
import pyarrow.fs as pafs
import pytest

from analytics.lake import Lake, open_lake
from analytics.lake import _delta as delta_module
from analytics.lake._delta import COMMIT_ID, append, delete_rows, ensure_table, expunge, open_table
from analytics.lake.maintenance import MaintenancePolicy
from config import LakeSettings
from tests.analytics.lake.delta_files import table_ids

SCHEMA = pa.schema([pa.field("n", pa.int64())])
USERS = pa.schema([pa.field("user_id", pa.string()), pa.field("n", pa.int64())])


def _rows(user: str, first: int, count: int = 1) -> pa.Table:
    return pa.table({"user_id": [user] * count, "n": list(range(first, first + count))}, schema=USERS)


def _numbers(lake: Lake) -> list[int]:
    table = open_table(lake, "t")
    assert table is not None
    return sorted(table.to_pyarrow_table(columns=["n"])["n"].to_pylist())


def test_first_writers_creating_a_table_at_one_instant_make_one_table(tmp_path: Path) -> None:
    lake = open_lake(str(tmp_path / "lake"))
    writers = 6
    start = threading.Barrier(writers)
    versions: list[int] = []
    failures: list[BaseException] = []

    def create() -> None:
        start.wait()
        try:
            versions.append(ensure_table(lake, "t", SCHEMA).version())
        except BaseException as error:
            failures.append(error)

    threads = [threading.Thread(target=create) for _ in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    assert versions == [0] * writers
    assert len(table_ids(lake, "t")) == 1
    table = open_table(lake, "t")
    assert table is not None and table.version() == 0


def test_an_append_on_a_snapshot_an_erasures_clean_up_deleted_reopens_the_table_and_commits(
    any_lake: Lake,
) -> None:
    held = ensure_table(any_lake, "t", USERS)  # a writer's open table, at version 0
    for n in range(3):
        append(any_lake, ensure_table(any_lake, "t", USERS), "t", _rows("erased", n))
    delete_rows(any_lake, "t", "user_id = 'erased'")
    expunge(any_lake, "t")  # the log before its checkpoint is deleted: version 0 reads no more
    version = append(any_lake, held, "t", _rows("kept", 10))
    latest = open_table(any_lake, "t")
    assert latest is not None and version == latest.version()
    assert _numbers(any_lake) == [10]


def test_an_append_that_raised_after_its_commit_landed_is_not_committed_twice(
    lake: Lake, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = ensure_table(lake, "t", USERS)
    real = deltalake.write_deltalake
    calls: list[dict[str, Any]] = []

    def commit_then_fail(*args: Any, **kwargs: Any) -> None:
        calls.append(kwargs)
        real(*args, **kwargs)
        if len(calls) == 1:
            raise FileNotFoundError("a post-commit step lost a log entry")  # as delta-rs raises it

    monkeypatch.setattr(delta_module, "write_deltalake", commit_then_fail)
    version = append(lake, table, "t", _rows("kept", 1))
    assert len(calls) == 1 and version == 1
    assert _numbers(lake) == [1]
    commit = calls[0]["commit_properties"].custom_metadata
    assert COMMIT_ID in commit


def test_an_append_published_below_an_expunges_checkpoint_is_taken_back_and_appended_again(
    any_lake: Lake, monkeypatch: pytest.MonkeyPatch
) -> None:
    """delta-rs reads the newest version, writes its data files, then publishes `<v>.json`
    create-if-absent: an expunge in between that checkpoints a later version and deletes the entries
    before it leaves the name free, and the commit lands where no reader looks. Staged here: the
    append's entry is set aside while others commit and an expunge runs, then published again."""
    table = ensure_table(any_lake, "t", USERS)
    real = deltalake.write_deltalake
    entry = any_lake.path("t/_delta_log/00000000000000000001.json")
    stranded: list[str] = []

    def publish_below_a_checkpoint(*args: Any, **kwargs: Any) -> None:
        real(*args, **kwargs)
        if stranded:
            return
        with any_lake.fs.open_input_stream(entry) as handle:
            ours = handle.read()
        stranded.extend(
            line.split('"path":"')[1].split('"')[0] for line in ours.decode().splitlines() if '"add"' in line
        )
        any_lake.fs.delete_file(entry)
        for n in (20, 21):  # others commit versions 1 and 2, then an expunge deletes the log before 2
            real(ensure_table(any_lake, "t", USERS), _rows("other", n), mode="append")
        expunge(any_lake, "t")
        assert _log_entries(any_lake)[0] != "00000000000000000001.json"
        with any_lake.fs.open_output_stream(entry) as handle:
            handle.write(ours)

    monkeypatch.setattr(delta_module, "write_deltalake", publish_below_a_checkpoint)
    version = append(any_lake, table, "t", _rows("kept", 1))
    latest = open_table(any_lake, "t")
    assert latest is not None and version == latest.version()
    assert _numbers(any_lake) == [1, 20, 21]  # ours once, on the newest version
    assert "00000000000000000001.json" not in _log_entries(any_lake)  # the stranded entry is gone
    assert [any_lake.fs.get_file_info(any_lake.path(f"t/{path}")).type for path in stranded] == [
        pafs.FileType.NotFound
    ]


def test_writers_append_while_erasures_clean_the_log_and_every_append_lands(lake: Lake) -> None:
    ensure_table(lake, "t", USERS)
    for n in range(20):
        append(lake, ensure_table(lake, "t", USERS), "t", _rows(f"erased-{n}", 1000 + n))
    stop = threading.Event()
    failures: list[BaseException] = []
    appended: list[int] = []

    def writer(first: int) -> None:
        table = ensure_table(lake, "t", USERS)  # held across appends, as the landing holds it
        try:
            for n in range(first, first + 60):
                append(lake, table, "t", _rows("kept", n))
                appended.append(n)
        except BaseException as error:  # the test reports it
            failures.append(error)

    def eraser() -> None:
        number = 0
        try:
            while not stop.is_set() and number < 20:
                delete_rows(lake, "t", f"user_id = 'erased-{number}'")
                expunge(lake, "t")
                number += 1
        except BaseException as error:  # the test reports it
            failures.append(error)

    threads = [threading.Thread(target=writer, args=(first,)) for first in (0, 100)]
    threads.append(threading.Thread(target=eraser))
    for thread in threads:
        thread.start()
    for thread in threads[:2]:
        thread.join()
    stop.set()
    threads[2].join()
    assert failures == []
    kept = [*range(60), *range(100, 160)]
    assert sorted(appended) == kept
    assert [n for n in _numbers(lake) if n < 1000] == kept  # each append once


def _log_entries(lake: Lake) -> list[str]:
    selector = pafs.FileSelector(lake.path("t/_delta_log"), allow_not_found=True)
    return sorted(i.base_name for i in lake.fs.get_file_info(selector) if i.base_name.endswith(".json"))


def test_a_new_table_carries_the_shipped_cadence_checkpoints_and_retentions(lake: Lake) -> None:
    shipped = MaintenancePolicy.from_settings(LakeSettings()).table_properties()
    configuration = ensure_table(lake, "t", SCHEMA).metadata().configuration
    assert {key: configuration.get(key) for key in shipped} == shipped
    assert configuration["delta.checkpointInterval"] == str(LakeSettings().checkpoint_interval)


def test_an_expunge_puts_back_the_log_retention_the_table_was_configured_with(any_lake: Lake) -> None:
    table = ensure_table(any_lake, "t", USERS)
    table.alter.set_table_properties({"delta.logRetentionDuration": "interval 36 hours"})
    for n in range(3):
        append(any_lake, ensure_table(any_lake, "t", USERS), "t", _rows("erased", n))
    delete_rows(any_lake, "t", "user_id = 'erased'")

    expunge(any_lake, "t")

    latest = open_table(any_lake, "t")
    assert latest is not None
    assert latest.metadata().configuration["delta.logRetentionDuration"] == "interval 36 hours"
    checkpoint = latest.version() - 1  # the expunge's checkpoint, then the retention's restoring commit
    assert _log_entries(any_lake) == [f"{v:020d}.json" for v in (checkpoint, checkpoint + 1)]


def test_an_expunge_after_one_that_died_with_the_retention_short_puts_back_the_shipped_one(
    lake: Lake,
) -> None:
    table = ensure_table(lake, "t", USERS)
    table.alter.set_table_properties({"delta.logRetentionDuration": "interval 0 seconds"})

    expunge(lake, "t")

    latest = open_table(lake, "t")
    assert latest is not None
    shipped = MaintenancePolicy.from_settings(LakeSettings()).table_properties()
    assert (
        latest.metadata().configuration["delta.logRetentionDuration"] == shipped["delta.logRetentionDuration"]
    )
