"""A lake in the format before Delta, for the migration tests: Parquet files named by the range they hold
under `<dataset>/event_date=<day>/`, schema anchors, a snapshot state file and its manifest, an as-of
state, the rewrite lock file. Written with the old landing's own row buffers."""

from __future__ import annotations

import hashlib
import json
import os
import random
from collections.abc import Sequence

import pyarrow.parquet as pq

from analytics.lake import changes_schema, default_allow_list
from analytics.lake._rows import ChangeBuffer, OutcomeBuffer
from analytics.lake._schema import OUTCOMES_SCHEMA, state_schema
from pipeline.events import StreamEvent
from schema.outcomes import OutcomeEvent


def _write(root: str, relative: str, table: object) -> None:
    path = os.path.join(root, relative)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    pq.write_table(table, path, compression="zstd")


def write_old_lake(
    root: str,
    events: Sequence[StreamEvent],
    outcomes: Sequence[OutcomeEvent],
    *,
    flush_rows: int = 9,
    shuffle_seed: int | None = None,
) -> int:
    """Land `events` (twice: a replay with other batch boundaries over the first half) and `outcomes`
    as the old landing named its files; returns the change rows the lake holds. With `shuffle_seed`,
    each file's rows are out of stream order (the seed picks the order)."""
    shuffler = random.Random(shuffle_seed) if shuffle_seed is not None else None
    allow = default_allow_list()
    rows = 0
    batches = [events[i : i + flush_rows] for i in range(0, len(events), flush_rows)]
    half = events[: len(events) // 2]
    batches += [half[i : i + flush_rows + 4] for i in range(0, len(half), flush_rows + 4)]
    for batch in batches:
        buffer = ChangeBuffer(allow)
        for event in batch:
            buffer.append(event)
        for part in buffer.files():
            keys = part.table["sequence_key"].to_pylist()
            shard = part.table["shard_id"][0].as_py()
            name = f"{hashlib.sha256(shard.encode()).hexdigest()[:8]}_{shard}_{keys[0]}_{keys[-1]}.parquet"
            data = part.table
            if shuffler is not None:
                order = list(range(data.num_rows))
                shuffler.shuffle(order)
                data = data.take(order)
            _write(root, f"changes/event_date={part.day.isoformat()}/{name}", data)  # same range: same name
    outcome_buffer = OutcomeBuffer()
    for outcome in outcomes:
        outcome_buffer.append(outcome)
    for index, part in enumerate(outcome_buffer.files()):
        _write(root, f"outcomes/event_date={part.day.isoformat()}/outcomes_{index:032d}.parquet", part.table)
    for dataset, schema in (("changes", changes_schema(allow)), ("outcomes", OUTCOMES_SCHEMA)):
        _write(root, f"{dataset}/event_date=1970-01-01/_schema.parquet", schema.empty_table())
    state = state_schema(allow).empty_table()
    _write(root, "snapshots/state/base-0000000001.parquet", state)
    _write(root, "snapshots/state/_schema.parquet", state)
    _write(root, "snapshots/as_of/20260102T000000000000Z.parquet", state)
    os.makedirs(os.path.join(root, "snapshots/manifests"), exist_ok=True)
    with open(os.path.join(root, "snapshots/manifests/0000000001.json"), "w", encoding="utf-8") as handle:
        json.dump({"format": 1, "version": 1, "state_files": [], "folded": {}}, handle)
    open(os.path.join(root, ".rewrite.lock"), "w").close()
    for folder, _, names in os.walk(os.path.join(root, "changes")):
        rows += sum(
            pq.read_metadata(os.path.join(folder, n)).num_rows for n in names if not n.startswith("_")
        )
    return rows
