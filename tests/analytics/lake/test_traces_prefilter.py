"""analytics/lake/_traces.py: the scan's pre-filter (a log file or checkpoint holding none of the batch's
ids' bytes is not parsed) never hides a user the full reading finds, and every kind of text column of a
data file is read."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from analytics.lake import Lake, _traces
from analytics.lake._delta import delete_rows
from analytics.lake._traces import scan_table_for
from analytics.lake.purge import purge_users
from tests.analytics.lakesim import TableSim, land

TABLE = "changes"
ENTRY = f"{TABLE}/_delta_log/00000000000000000007.json"
CHECKPOINT = f"{TABLE}/_delta_log/00000000000000000010.checkpoint.parquet"


def _write(lake: Lake, relative: str, data: bytes) -> None:
    os.makedirs(os.path.dirname(lake.path(relative)), exist_ok=True)
    with open(lake.path(relative), "wb") as out:
        out.write(data)


def _write_parquet(lake: Lake, relative: str, table: pa.Table) -> None:
    os.makedirs(os.path.dirname(lake.path(relative)), exist_ok=True)
    pq.write_table(table, lake.path(relative))


def _held(lake: Lake, user_id: str, *others: str) -> tuple[str, ...]:
    return scan_table_for(lake, TABLE, (user_id, *others)).holding.get(user_id, ())


def _add_action(*, path: str = "part-1.parquet", stats: str = "{}", partition: str = "2026-01-01",
                parsed_min: str = "a") -> dict[str, Any]:  # fmt: skip
    return {
        "path": path,
        "partitionValues": [("event_date", partition)],
        "stats": stats,
        "stats_parsed": {"minValues": {"user_id": parsed_min}},
    }


_ADD = pa.struct(
    [
        ("path", pa.string()),
        ("partitionValues", pa.map_(pa.string(), pa.string())),
        ("stats", pa.string()),
        ("stats_parsed", pa.struct([("minValues", pa.struct([("user_id", pa.string())]))])),
    ]
)


def _checkpoint(*actions: dict[str, Any]) -> pa.Table:
    return pa.table({"add": pa.array(list(actions), _ADD)})


def _calls(monkeypatch: pytest.MonkeyPatch, method: str) -> list[int]:
    """Counts the calls of `_Matcher.<method>` (the full reading the pre-filter saves)."""
    calls: list[int] = []
    original: Callable[..., set[str]] = getattr(_traces._Matcher, method)

    def counted(self: Any, *args: Any) -> set[str]:
        calls.append(1)
        return original(self, *args)

    monkeypatch.setattr(_traces._Matcher, method, counted)
    return calls


# -- log entries ----------------------------------------------------------------------------------


def test_a_log_entry_naming_the_id_in_its_stats_is_found(lake: Lake) -> None:
    stats = json.dumps({"minValues": {"user_id": "u001"}})
    _write(lake, ENTRY, json.dumps({"add": {"path": "p", "stats": stats}}).encode() + b"\n")
    assert _held(lake, "u001") == (ENTRY,)


def test_a_log_entry_naming_none_of_the_ids_is_not_parsed(
    lake: Lake, monkeypatch: pytest.MonkeyPatch
) -> None:
    _write(
        lake, ENTRY, json.dumps({"add": {"path": "p", "stats": '{"minValues":{"user_id":"u002"}}'}}).encode()
    )
    parsed = _calls(monkeypatch, "in_log_text")
    assert (_held(lake, "u001"), len(parsed)) == ((), 0)


def test_a_log_entry_naming_one_id_of_the_batch_is_parsed(
    lake: Lake, monkeypatch: pytest.MonkeyPatch
) -> None:
    _write(lake, ENTRY, json.dumps({"commitInfo": {"userName": "u002"}}).encode())
    parsed = _calls(monkeypatch, "in_log_text")
    assert (_held(lake, "u002", "u001"), len(parsed)) == ((ENTRY,), 1)


def test_a_plain_id_a_writer_wrote_as_unicode_escapes_is_found(lake: Lake) -> None:
    # Legal JSON from any writer: "u001" spelled \u0075\u0030\u0030\u0031 holds none of the id's bytes.
    _write(lake, ENTRY, b'{"commitInfo":{"userName":"\\u0075\\u0030\\u0030\\u0031"}}\n')
    assert _held(lake, "u001") == (ENTRY,)


def test_a_plain_id_escaped_inside_nested_stats_is_found(lake: Lake) -> None:
    stats = '{"minValues":{"user_id":"\\u0075001"}}'  # the stats text itself holds the escape
    _write(lake, ENTRY, json.dumps({"add": {"path": "p", "stats": stats}}).encode())
    assert _held(lake, "u001") == (ENTRY,)


def test_an_id_with_a_character_writers_escape_is_found_escaped(lake: Lake) -> None:
    _write(lake, ENTRY, b'{"commitInfo":{"userName":"team\\/u001"}}\n')
    assert _held(lake, "team/u001") == (ENTRY,)


def test_an_id_in_a_log_entry_written_in_utf16_is_found(lake: Lake) -> None:
    # `json.loads` reads UTF-16 bytes as well as UTF-8: the full reading finds the id there.
    _write(lake, ENTRY, json.dumps({"commitInfo": {"userName": "u001"}}).encode("utf-16-le"))
    assert _held(lake, "u001") == (ENTRY,)


def test_an_id_bounded_in_a_predicate_is_found(lake: Lake) -> None:
    entry = {"commitInfo": {"operationParameters": {"predicate": "user_id IN ('u001', 'u009')"}}}
    _write(lake, ENTRY, json.dumps(entry).encode())
    assert _held(lake, "u001") == (ENTRY,)


# -- checkpoints ----------------------------------------------------------------------------------


def test_a_checkpoint_naming_the_id_only_in_its_stats_text_is_found(lake: Lake) -> None:
    _write_parquet(lake, CHECKPOINT, _checkpoint(_add_action(stats='{"maxValues":{"pk":"USER#u001"}}')))
    assert _held(lake, "u001") == (CHECKPOINT,)


def test_a_checkpoint_naming_the_id_only_in_a_partition_value_is_found(lake: Lake) -> None:
    _write_parquet(lake, CHECKPOINT, _checkpoint(_add_action(partition="u001")))
    assert _held(lake, "u001") == (CHECKPOINT,)


def test_a_checkpoint_naming_the_id_only_in_its_parsed_stats_is_found(lake: Lake) -> None:
    _write_parquet(lake, CHECKPOINT, _checkpoint(_add_action(parsed_min="u001")))
    assert _held(lake, "u001") == (CHECKPOINT,)


def test_a_checkpoint_with_the_id_escaped_in_its_stats_text_is_found(lake: Lake) -> None:
    _write_parquet(lake, CHECKPOINT, _checkpoint(_add_action(stats='{"minValues":{"user_id":"\\u0075001"}}')))
    assert _held(lake, "u001") == (CHECKPOINT,)


@pytest.mark.parametrize(
    "column",
    [
        pa.array(["u001"]).dictionary_encode(),
        pa.array(["u001"], pa.large_string()),
        pa.array(["u001"], pa.string_view()),
        pa.array([b"u001"], pa.binary()),
        pa.array([["x", "u001"]], pa.list_(pa.string(), 2)),  # a type the pre-filter does not know
    ],
    ids=["dictionary", "large_string", "string_view", "binary", "fixed_size_list"],
)
def test_a_checkpoint_naming_the_id_in_any_kind_of_text_column_is_found(lake: Lake, column: pa.Array) -> None:
    _write_parquet(lake, CHECKPOINT, pa.table({"txn": pa.StructArray.from_arrays([column], ["appId"])}))
    assert _held(lake, "u001") == (CHECKPOINT,)


def test_a_checkpoint_naming_none_of_the_ids_is_not_read_row_by_row(
    lake: Lake, monkeypatch: pytest.MonkeyPatch
) -> None:
    _write_parquet(lake, CHECKPOINT, _checkpoint(_add_action(stats='{"minValues":{"user_id":"u002"}}')))
    read = _calls(monkeypatch, "in_values")
    assert (_held(lake, "u001"), len(read)) == ((), 0)


def test_a_v2_checkpoint_sidecar_naming_the_id_is_found(lake: Lake) -> None:
    sidecar = f"{TABLE}/_delta_log/_sidecars/00000000000000000010.0a1b2c3d.parquet"
    _write_parquet(lake, sidecar, _checkpoint(_add_action(stats='{"minValues":{"user_id":"u001"}}')))
    assert _held(lake, "u001") == (sidecar,)


# -- data files -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "column",
    [
        pa.array(["u001"], pa.string_view()),
        pa.array(["u001"]).dictionary_encode(),
        pa.array([b"USER#u001"], pa.binary()),
    ],
    ids=["string_view", "dictionary", "binary"],
)
def test_a_data_file_holding_the_id_in_any_kind_of_text_column_is_found(lake: Lake, column: pa.Array) -> None:
    data = f"{TABLE}/event_date=2026-01-01/part-00000-0a1b-c000.zstd.parquet"
    _write_parquet(lake, data, pa.table({"user_id": column}))
    assert _held(lake, "u001") == (data,)


def test_the_users_left_in_a_file_a_purge_rewrote_are_found_there(lake: Lake, history: TableSim) -> None:
    # delta-rs writes its DELETE's rewritten files with string_view columns.
    land(lake, history, flush_rows=30)
    before = {info.path for info in _traces.table_files(lake, TABLE)}
    purge_users(lake, ["u001"])
    rewritten = [
        lake.relative(str(info.path))
        for info in _traces.table_files(lake, TABLE)
        if info.path not in before and info.base_name.endswith(".parquet") and "_delta_log" not in info.path
    ]
    assert rewritten
    for path in rewritten:
        users = {u for u in pq.read_table(lake.path(path), columns=["user_id"]).column(0).to_pylist() if u}
        found = scan_table_for(lake, TABLE, sorted(users))
        assert {user for user in users if path in found.holding.get(user, ())} == users


# -- the pre-filter changes no answer -------------------------------------------------------------


def test_a_scan_with_the_pre_filter_answers_as_the_full_reading_does(
    lake: Lake, history: TableSim, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A log of appends, a DELETE whose clean-up never ran (its predicate and removes in the log), a
    # checkpoint, and ids short and long, held and not.
    land(lake, history, flush_rows=30)
    purge_users(lake, ["u030"])  # its clean-up writes a checkpoint
    delete_rows(lake, TABLE, "user_id = 'u003' OR pk = 'USER#u003'")
    users = [f"u{number:03d}" for number in range(1, 34)] + ["1", "u", "USER", "shardId"]
    batches = [users[start : start + 10] for start in range(0, len(users), 10)]
    filtered = [scan_table_for(lake, TABLE, batch) for batch in batches]
    monkeypatch.setattr(_traces._Matcher, "may_be_in_bytes", lambda self, data: True)
    monkeypatch.setattr(_traces._Matcher, "may_be_in_arrays", lambda self, arrays: True)
    assert filtered == [scan_table_for(lake, TABLE, batch) for batch in batches]


# -- data files: footer statistics ----------------------------------------------------------------

DATA = f"{TABLE}/event_date=2026-01-01/part-00000-0c1d-c000.zstd.parquet"


def _columns_read(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    read: list[str] = []
    original = pq.ParquetFile.read

    def observed(self: pq.ParquetFile, columns: list[str] | None = None, **kwargs: Any) -> pa.Table:
        read.extend(columns or [])
        return original(self, columns=columns, **kwargs)

    monkeypatch.setattr(pq.ParquetFile, "read", observed)
    return read


def test_a_text_column_whose_statistics_rule_out_every_id_is_not_read(
    lake: Lake, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = pa.table({"event_type": ["INSERT", "MODIFY"], "user_id": ["u001", "u777"], "n": [1, 2]})
    _write_parquet(lake, DATA, table)
    read = _columns_read(monkeypatch)
    assert (_held(lake, "u001"), read) == ((DATA,), ["user_id"])


def test_a_row_group_whose_statistics_bracket_the_id_gets_its_column_read(lake: Lake) -> None:
    os.makedirs(os.path.dirname(lake.path(DATA)), exist_ok=True)
    pq.write_table(pa.table({"sk": ["a", "b", "u001"]}), lake.path(DATA), row_group_size=1)
    assert _held(lake, "u001") == (DATA,)


def test_a_column_holding_json_is_read_whatever_its_statistics(lake: Lake) -> None:
    # min = max = the JSON text: no bound rules out an id inside it.
    _write_parquet(lake, DATA, pa.table({"row": ['{"user_id":"u001"}']}))
    assert _held(lake, "u001") == (DATA,)


def test_a_column_with_non_ascii_statistics_is_read(lake: Lake, monkeypatch: pytest.MonkeyPatch) -> None:
    # Old writers ordered bytes as signed: past ASCII a bound may not bound.
    _write_parquet(lake, DATA, pa.table({"note": ["zz", "é"]}))
    read = _columns_read(monkeypatch)
    assert (_held(lake, "u001"), read) == ((), ["note"])


def test_a_column_without_statistics_is_read(lake: Lake, monkeypatch: pytest.MonkeyPatch) -> None:
    os.makedirs(os.path.dirname(lake.path(DATA)), exist_ok=True)
    pq.write_table(pa.table({"note": ["zz"]}), lake.path(DATA), write_statistics=False)
    read = _columns_read(monkeypatch)
    assert (_held(lake, "u001"), read) == ((), ["note"])
