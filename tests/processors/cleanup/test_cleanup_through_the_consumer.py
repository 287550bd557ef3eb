"""The cleanup handler inside the shard consumer (the real decoder, dead letters and parked store): a
record naming no account is dead-lettered alone, and a hung retry queue parks the window locally."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from devstack.fake_array import FakeArrayServer
from pipeline.dead_letter import DeadLetters
from pipeline.decode import decode_record
from pipeline.handlers import HandlerRegistry
from pipeline.parking import ParkedWork, RawRecord
from pipeline.quarantine import Quarantine
from pipeline.shard_consumer import CommitPolicy, HandlerRetryPolicy, ShardConsumer
from processors.cleanup import CleanupHandler
from schema.outcomes import OutcomeKind
from tests.processors.cleanup.cleanup_helpers import STREAM_ARN, ListSink, expiry_record

SHARD = "shardId-00000001700000000000-bbbbbbbb"


def _consumer(root: Path, handler: CleanupHandler) -> ShardConsumer:
    registry = HandlerRegistry()
    registry.register(handler)
    consumer = ShardConsumer(
        stream_arn=STREAM_ARN,
        handlers=registry,
        decode=decode_record,
        quarantine=Quarantine(root / "quarantine"),
        parked=ParkedWork(root / "parked"),
        dead_letters=DeadLetters(root / "dead"),
        commit=CommitPolicy(every_records=10_000, interval_seconds=3600),
        retry=HandlerRetryPolicy(attempts=2, max_seconds=5, initial_wait=0.01, max_wait=0.02),
    )
    consumer.start(SHARD)
    return consumer


def _window(*accounts: str) -> list[RawRecord]:
    return [
        RawRecord(
            expiry_record(f"u{index}", account, event_id=f"event-{index}", sequence_number=str(500 + index)),
            str(500 + index),
        )
        for index, account in enumerate(accounts)
    ]


def test_an_empty_account_id_among_three_good_expiries_three_deleted_one_dead_lettered_all_checkpointed(
    tmp_path: Path,
    make_handler: Callable[..., CleanupHandler],
    fake_array: FakeArrayServer,
    put_rows: Callable[[list[tuple[str, str, str]]], None],
    sink: ListSink,
) -> None:
    fake_array.add_users(["acct-0", "acct-2", "acct-3"])
    put_rows([("u0", "acct-0", "Superseded"), ("u2", "acct-2", "Superseded"), ("u3", "acct-3", "Superseded")])
    consumer = _consumer(tmp_path, make_handler())
    checkpoints: list[str | None] = []
    consumer.process(_window("acct-0", "", "acct-2", "acct-3"), checkpoints.append)
    consumer.commit(checkpoints.append)
    assert sorted(fake_array.deleted_users()) == ["acct-0", "acct-2", "acct-3"]
    assert sink.kinds().count(OutcomeKind.CLEANUP_DELETED) == 3
    [dead] = list(DeadLetters(tmp_path / "dead"))
    assert (dead.handler, dead.sequence_number) == ("cleanup", "501")
    assert list(ParkedWork(tmp_path / "parked")) == []
    assert checkpoints == ["503"]


@pytest.mark.timeout(60)
def test_a_hung_retry_queue_counts_its_send_as_sent_then_parks_the_next_window_locally(
    tmp_path: Path,
    make_handler: Callable[..., CleanupHandler],
    hung_client: Callable[..., Any],
    fake_array: FakeArrayServer,
    put_rows: Callable[[list[tuple[str, str, str]]], None],
) -> None:
    fake_array.add_users(["acct-0", "acct-1", "acct-2"])
    fake_array.expire_credentials()  # every delete is refused: the work must go to the retry queue
    put_rows([(f"u{i}", f"acct-{i}", "Superseded") for i in range(3)])
    handler = make_handler(sqs=hung_client("sqs", read_timeout=120), retry_budget_seconds=2.0)
    consumer = _consumer(tmp_path, handler)
    checkpoints: list[str | None] = []
    consumer.process(_window("acct-0", "acct-1"), checkpoints.append)
    consumer.commit(checkpoints.append)
    # The send timed out: counted as sent (SQS is at-least-once), so nothing is parked locally.
    assert (list(ParkedWork(tmp_path / "parked")), checkpoints) == ([], ["501"])
    assert handler.stats.park_unconfirmed == 2
    # The next window, while the queue is taken as unresponsive, is parked locally at once.
    later = RawRecord(expiry_record("u2", "acct-2", event_id="event-2", sequence_number="600"), "600")
    consumer.process([later], checkpoints.append)
    consumer.commit(checkpoints.append)
    [batch] = list(ParkedWork(tmp_path / "parked"))
    assert (batch.handler, [record.sequence_number for record in batch.records]) == ("cleanup", ["600"])
    assert fake_array.users() == {"acct-0", "acct-1", "acct-2"}
    assert checkpoints == ["501", "600"]  # the shard moves on: the work is durable in the parked store
