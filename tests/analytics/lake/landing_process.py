"""A landing process for the kill -9 tests: `python -m tests.analytics.lake.landing_process`.

It lands one seeded stream (a `TableSim` history of two shards, each expiry's outcome right after its
source event) through `LakeHandler`, from the checkpoint in `<state>/checkpoint` on, flushing every
`--commit-every` events and only then writing the checkpoint, as the KCL consumer does. So a process
killed anywhere replays, on its next run, everything after the last checkpoint, with other batch
boundaries when `--flush-rows` differs.

Fault hook (test-only, this file's own flags): `--kill-in-commit N` makes the N-th commit write its
data files where delta-rs would (tests/analytics/lake/failed_commit.py) and then kill the process
with SIGKILL before any log entry is written; `--kill-after-commit N` kills it right after the N-th
commit landed, before its checkpoint; `--kill-after-events N` kills it after N events were added.
Exits 0 once the whole stream is landed and checkpointed. Writes nothing to stdout.
"""

from __future__ import annotations

import argparse
import os
import signal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from analytics.lake import Lake, LakeHandler, open_lake
from analytics.lake import _delta as delta_module
from config import LakeSettings
from pipeline.events import StreamEvent
from schema.outcomes import OutcomeEvent
from tests.analytics.lake import failed_commit
from tests.analytics.lakesim import TableSim

SHARDS = ("shardId-00000001-aaaa", "shardId-00000002-bbbb")


def history(seed: int) -> TableSim:
    sim = TableSim(shards=SHARDS, seed=seed)
    sim.random_history(users=10, operations=120)
    return sim


def stream(seed: int) -> list[StreamEvent | OutcomeEvent]:
    """The events in order, each expiry's outcome right after the event it answers."""
    sim = history(seed)
    answers: dict[str, list[OutcomeEvent]] = {}
    for outcome in sim.outcomes:
        answers.setdefault(str(outcome.source_event_id), []).append(outcome)
    items: list[StreamEvent | OutcomeEvent] = []
    for event in sim.events:
        items.append(event)
        items.extend(answers.get(event.event_id, []))
    return items


def _kill() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _install_faults(lake: Lake, args: argparse.Namespace) -> None:
    commits = {"n": 0}
    real = getattr(delta_module, "write_deltalake")  # noqa: B009 (the module's own import, replaced below)
    files_then_fail = _files_writer(lake)

    def write(table: Any, data: pa.Table, **kwargs: Any) -> None:
        commits["n"] += 1
        if commits["n"] == args.kill_in_commit:
            try:
                files_then_fail(table, data, partition_by=kwargs.get("partition_by"))
            except OSError:
                _kill()  # the files are written, the log entry is not
        real(table, data, **kwargs)
        if commits["n"] == args.kill_after_commit:
            _kill()  # committed, not checkpointed

    setattr(delta_module, "write_deltalake", write)  # noqa: B010


def _files_writer(lake: Lake) -> Any:
    """failed_commit's writer of a commit's data files (it raises OSError once they are written)."""
    patch = pytest.MonkeyPatch()
    failed_commit.failing_commits(patch, lake)
    writer = getattr(delta_module, "write_deltalake")  # noqa: B009
    patch.undo()
    return writer


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", required=True)
    parser.add_argument("--state", required=True)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--flush-rows", type=int, default=1000)
    parser.add_argument("--commit-every", type=int, default=15)
    parser.add_argument("--kill-in-commit", type=int, default=0)
    parser.add_argument("--kill-after-commit", type=int, default=0)
    parser.add_argument("--kill-after-events", type=int, default=0)
    parser.add_argument("--s3-endpoint", default="")
    args = parser.parse_args()
    if args.s3_endpoint:
        lake = open_lake(
            args.root,
            endpoint_url=args.s3_endpoint,
            region="eu-west-1",
            access_key="testing",
            secret_key="testing",
        )
    else:
        lake = open_lake(args.root)
    _install_faults(lake, args)
    checkpoint_file = Path(args.state) / "checkpoint"
    checkpoint = int(checkpoint_file.read_text()) if checkpoint_file.exists() else 0
    items = stream(args.seed)
    handler = LakeHandler(lake, LakeSettings(flush_rows=args.flush_rows))
    for added, position in enumerate(range(checkpoint, len(items)), start=1):
        item = items[position]
        if isinstance(item, OutcomeEvent):
            handler.add_outcome(item)
        else:
            handler.add(item)
        if added == args.kill_after_events:
            _kill()
        done = position + 1
        if done % args.commit_every == 0 or done == len(items):
            handler.flush()
            checkpoint_file.write_text(str(done))


if __name__ == "__main__":
    main()
