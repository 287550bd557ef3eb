"""A landing process for the concurrent-writers tests: `python -m tests.analytics.lake.concurrent_writer
ROOT SHARD_INDEX [S3_ENDPOINT]` lands the events of one shard of the shared simulated history in many
small flushes, each a commit, then exits 0."""

from __future__ import annotations

import sys

from analytics.lake import LakeHandler, open_lake
from config import LakeSettings
from tests.analytics.lakesim import TableSim

SHARDS = tuple(f"shardId-0000000{n}-{'abcd'[n - 1] * 4}" for n in range(1, 5))


def history() -> TableSim:
    sim = TableSim(shards=SHARDS, seed=31)
    sim.random_history(users=16, operations=240)
    return sim


def main(argv: list[str]) -> int:
    root, index = argv[0], int(argv[1])
    endpoint = argv[2] if len(argv) > 2 else None
    lake = (
        open_lake(root, endpoint_url=endpoint, region="eu-west-1", access_key="testing", secret_key="testing")
        if endpoint
        else open_lake(root)
    )
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
