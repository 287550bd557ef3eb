"""telemetry/_figures.py: what the instrumented pieces count (read from this process's registry)."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from prometheus_client import REGISTRY

import telemetry
from config import MetricsSettings
from pipeline.shard_consumer import ShardConsumer
from processors.cleanup._procedure import make_outcome
from processors.cleanup._work import CleanupWork
from processors.cleanup.retry_worker import RetryWorker
from schema.outcomes import OutcomeKind
from tests.pipeline._consumer_fakes import STREAM, Recorder, make_consumer, records
from tests.processors.cleanup.cleanup_helpers import FixedClock, ListSink

SHARD_AGE = "entitlements_consumer_shard_record_age_seconds"
CAUGHT_UP = "entitlements_consumer_shard_caught_up"


def sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def change(names: dict[str, tuple[str, dict[str, str]]], act: Callable[[], None]) -> dict[str, float]:
    before = {key: sample(name, **labels) for key, (name, labels) in names.items()}
    act()
    return {key: sample(name, **labels) - before[key] for key, (name, labels) in names.items()}


def test_a_committed_window_counts_its_records_quarantined_dead_lettered_checkpoint_and_flush(
    tmp_path: Path,
) -> None:
    consumer = make_consumer(tmp_path, Recorder("figures-a"), every=3)
    counted = change(
        {
            "records": ("entitlements_consumer_records_total", {}),
            "quarantined": ("entitlements_consumer_quarantined_records_total", {}),
            "dead": ("entitlements_consumer_dead_lettered_records_total", {"handler": "figures-a"}),
            "checkpoints": ("entitlements_consumer_checkpoints_total", {}),
            "flushes": ("entitlements_consumer_flush_duration_seconds_count", {"handler": "figures-a"}),
        },
        lambda: consumer.process(records("e1", "bad-bytes", "poison-1"), lambda seq: None),
    )
    assert counted == {"records": 3, "quarantined": 1, "dead": 1, "checkpoints": 1, "flushes": 1}


def test_a_window_a_handler_cannot_flush_counts_one_parked_batch_of_its_records(tmp_path: Path) -> None:
    consumer = make_consumer(tmp_path, Recorder("figures-b", failures=[OSError("gone")]), every=2)
    counted = change(
        {
            "batches": ("entitlements_consumer_parked_batches_total", {"handler": "figures-b"}),
            "records": ("entitlements_consumer_parked_records_total", {"handler": "figures-b"}),
        },
        lambda: consumer.process(records("e1", "e2"), lambda seq: None),
    )
    assert counted == {"batches": 1, "records": 2}


def test_every_cleanup_outcome_made_is_counted_by_its_kind() -> None:
    work = CleanupWork(
        user_id="u1",
        array_account_id="a1",
        cleanup_kind="STALE",
        source_event_id="e1",
        source_stream_arn=STREAM,
        source_shard_id="shardId-1",
        source_sequence_number="100",
    )
    counted = change(
        {"deleted": ("entitlements_cleanup_outcomes_total", {"kind": OutcomeKind.CLEANUP_DELETED.value})},
        lambda: make_outcome(FixedClock(), work, OutcomeKind.CLEANUP_DELETED),
    )
    assert counted == {"deleted": 1}


class _QueueAttributes:
    def get_queue_attributes(self, **kwargs: Any) -> Any:
        return {
            "Attributes": {
                "ApproximateNumberOfMessages": "2",
                "ApproximateNumberOfMessagesNotVisible": "1",
                "ApproximateNumberOfMessagesDelayed": "4",
            }
        }


def test_the_retry_queue_depth_measured_by_the_worker_is_published() -> None:
    worker = RetryWorker(
        sqs=_QueueAttributes(),  # type: ignore[arg-type]
        dynamodb=None,  # type: ignore[arg-type]
        array=None,  # type: ignore[arg-type]
        table_name="t",
        queue_url="http://127.0.0.1:1/q",
        sink=ListSink(),
        clock=FixedClock(),
    )
    worker.queue_depth()
    assert sample("entitlements_cleanup_retry_queue_depth") == 7


def test_an_erasure_answer_is_counted_by_its_type_and_what_it_says() -> None:
    counted = change(
        {"ack": ("entitlements_erasure_answers_total", {"answer": "ACK/NOT_APPLICABLE"})},
        lambda: telemetry.erasure_answer("erasure/ACK", "NOT_APPLICABLE"),
    )
    assert counted == {"ack": 1}


def test_the_iterator_age_is_the_newest_records_and_zero_after_an_empty_read(tmp_path: Path) -> None:
    consumer = make_consumer(tmp_path, Recorder("figures-c"), every=10)
    consumer.process(records("e1"), lambda seq: None)
    behind = sample("entitlements_consumer_iterator_age_seconds")
    consumer.process([], lambda seq: None)
    assert (behind > 0, sample("entitlements_consumer_iterator_age_seconds")) == (True, 0)


def test_a_delete_held_by_the_budget_counts_in_prometheus_and_emf(tmp_path: Path) -> None:
    path = tmp_path / "emf.jsonl"
    publisher = telemetry.publish_emf(
        MetricsSettings(emf_file=path, emf_interval_seconds=3600), process="retry-worker"
    )
    assert publisher is not None
    before = sample("entitlements_cleanup_deletes_held_total")
    try:
        telemetry.cleanup_delete_held()
        publisher.publish()
    finally:
        publisher.close()
    assert sample("entitlements_cleanup_deletes_held_total") == before + 1
    held = [json.loads(line).get("CleanupDeletesHeld") for line in path.read_text().splitlines()]
    assert [1.0] in held  # the interval that held it; the closing document says 0


def _shard_consumer_at(tmp_path: Path, now: list[datetime]) -> ShardConsumer:
    consumer = make_consumer(tmp_path, Recorder("figures-lag"), every=10)
    consumer._wall_clock = lambda: now[0]  # a clock the test moves
    return consumer


def test_a_shards_newest_record_keeps_ageing_through_empty_reads_which_say_caught_up(tmp_path: Path) -> None:
    now = [datetime(2026, 1, 1, 0, 0, 30, tzinfo=UTC)]  # the fake records were made at 00:00:00
    consumer = _shard_consumer_at(tmp_path, now)
    consumer.process(records("e1"), lambda seq: None)
    behind = (sample(SHARD_AGE, shard="shardId-1"), sample(CAUGHT_UP, shard="shardId-1"))
    now[0] += timedelta(seconds=60)
    consumer.process([], lambda seq: None)
    idle = (sample(SHARD_AGE, shard="shardId-1"), sample(CAUGHT_UP, shard="shardId-1"))
    assert (behind, idle) == ((30.0, 0.0), (90.0, 1.0))


def test_a_shard_that_has_handled_nothing_has_no_record_age_yet_but_says_caught_up(tmp_path: Path) -> None:
    consumer = make_consumer(tmp_path, Recorder("figures-idle"), every=10)
    consumer.start("shardId-never")
    consumer.process([], lambda seq: None)
    assert (
        REGISTRY.get_sample_value(SHARD_AGE, {"shard": "shardId-never"}),
        sample(CAUGHT_UP, shard="shardId-never"),
    ) == (None, 1.0)


def test_stuck_leases_are_a_gauge_of_the_consumer_process() -> None:
    telemetry.stuck_leases(2)
    assert sample("entitlements_consumer_stuck_leases") == 2
