"""Writer processes for the concurrent-writers tests.

- `python -m tests.analytics.lake.concurrent_writer ROOT SHARD_INDEX [S3_ENDPOINT]` lands the events of
  one shard of the shared simulated history in many small flushes, each a commit, then exits 0.
- `python -m tests.analytics.lake.concurrent_writer create ROOT GO_FILE [S3_ENDPOINT]` waits until the
  local file GO_FILE exists (so that every process starts at one instant), then creates the lake's
  tables (`ensure_layout`) and `RACE_TABLES` more (each a new chance for the creators to collide),
  and exits 0.
"""

from __future__ import annotations

import os
import sys
import time

import pyarrow as pa

from analytics.lake import Lake, LakeHandler, default_allow_list, open_lake
from analytics.lake._delta import ensure_table
from analytics.lake._files import ensure_layout
from config import LakeSettings
from tests.analytics.lakesim import TableSim

RACE_TABLES = tuple(f"race/t{n:02d}" for n in range(16))
SHARDS = tuple(f"shardId-0000000{n}-{'abcd'[n - 1] * 4}" for n in range(1, 5))


def history() -> TableSim:
    sim = TableSim(shards=SHARDS, seed=31)
    sim.random_history(users=16, operations=240)
    return sim


def lake_at(root: str, endpoint: str | None) -> Lake:
    if endpoint:
        return open_lake(
            root, endpoint_url=endpoint, region="eu-west-1", access_key="testing", secret_key="testing"
        )
    return open_lake(root)


def _create(argv: list[str]) -> int:
    root, go = argv[0], argv[1]
    lake = lake_at(root, argv[2] if len(argv) > 2 else None)
    allow = default_allow_list()
    while not os.path.exists(go):
        time.sleep(0.0005)
    ensure_layout(lake, allow)
    schema = pa.schema([pa.field("n", pa.int64())])
    for name in RACE_TABLES:
        ensure_table(lake, name, schema)
    return 0


def main(argv: list[str]) -> int:
    if argv[0] == "create":
        return _create(argv[1:])
    root, index = argv[0], int(argv[1])
    lake = lake_at(root, argv[2] if len(argv) > 2 else None)
    sim = history()
    handler = LakeHandler(lake, LakeSettings(flush_rows=7))
    for event in sim.events:
        if event.position.shard_id == SHARDS[index]:
            handler.add(event)
    for position, outcome in enumerate(sim.outcomes):
        if position % len(SHARDS) == index:
            handler.add_outcome(outcome)
    handler.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
