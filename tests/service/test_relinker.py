"""The relinker worker (service/relinker.py): relink jobs from SQS through arraylink, each result an
outcome; terminal results (linked, not_active, refusals) acknowledged and never retried; transient
failures left for SQS to redeliver; its queues made only by the setup."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from config import AwsSettings, ServiceSettings, Settings
from entitlements import compose
from processors.cleanup import ensure_retry_queues
from schema.outcomes import OutcomeKind
from service.relinker import Relinker, enqueue_relinks
from tests.service.conftest import World
from tests.support.dynamodb import client


@pytest.fixture(scope="module")
def sqs(moto_endpoint: str) -> Any:
    return client(moto_endpoint, "sqs")


def _queue(sqs: Any, *, visibility: int = 30) -> str:
    queues = ensure_retry_queues(sqs, f"relink-{uuid.uuid4().hex[:8]}", visibility_timeout_seconds=visibility)
    return queues.queue_url


def _worker(world: World, sqs: Any, queue_url: str) -> Relinker:
    return Relinker(
        sqs=sqs,
        queue_url=queue_url,
        arraylink=world.parts.arraylink,
        recorder=world.parts.recorder,
        concurrency=4,
        wait_seconds=1,
        ack_interval_seconds=0.1,
    )


def _on_queue(sqs: Any, queue_url: str) -> tuple[int, int]:
    """(visible, in flight) messages."""
    names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
    attributes = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=names)["Attributes"]
    return int(attributes[names[0]]), int(attributes[names[1]])


def test_a_linked_job_is_recorded_and_acknowledged(world: World, sqs: Any) -> None:
    account = world.parts.service.signup("u-1").array_account_id
    queue_url = _queue(sqs)
    enqueue_relinks(sqs, queue_url, ["u-1"])
    report = _worker(world, sqs, queue_url).drain(max_seconds=30)
    assert (report.linked, report.acknowledged) == (1, 1)
    assert [(o.kind, o.array_account_id) for o in world.recorded()] == [(OutcomeKind.LINK_LINKED, account)]
    assert world.sink.flushes >= 1  # landed before the acknowledgement
    assert _on_queue(sqs, queue_url) == (0, 0)


def test_a_job_whose_row_was_retired_mid_link_is_recorded_not_active_and_never_retried(
    world: World, sqs: Any
) -> None:
    old = world.parts.service.signup("u-1").array_account_id

    def supersede() -> None:
        world.parts.service.second_signup("u-1")

    world.fake.before_processor_token = supersede
    queue_url = _queue(sqs, visibility=1)
    enqueue_relinks(sqs, queue_url, ["u-1"])
    report = _worker(world, sqs, queue_url).drain(max_seconds=30)
    assert (report.not_active, report.acknowledged, report.redelivered) == (1, 1, 0)
    refused = [(o.kind, o.array_account_id, o.detail) for o in world.recorded()]
    assert refused == [(OutcomeKind.LINK_NOT_ACTIVE, old, "save_refused")]
    assert world.fake.calls["processor_token"] == 1
    assert world.status("u-1", old) == "Superseded"
    assert _on_queue(sqs, queue_url) == (0, 0)


def test_a_job_for_a_user_with_no_active_row_is_recorded_not_active_and_acknowledged(
    world: World, sqs: Any
) -> None:
    world.parts.service.signup("u-1")
    world.parts.service.cancel("u-1")
    queue_url = _queue(sqs)
    enqueue_relinks(sqs, queue_url, ["u-1"])
    report = _worker(world, sqs, queue_url).drain(max_seconds=30)
    assert (report.not_active, report.acknowledged) == (1, 1)
    assert [o.detail for o in world.recorded()] == ["no_active_row"]
    assert world.fake.calls["primary_account"] == 0


def test_a_job_failing_transiently_is_recorded_failed_and_left_for_redelivery(world: World, sqs: Any) -> None:
    world.parts.service.signup("u-1")
    world.fake.transactions_statuses = [503, 503, 503]
    queue_url = _queue(sqs, visibility=30)
    enqueue_relinks(sqs, queue_url, ["u-1"])
    report = _worker(world, sqs, queue_url).drain(max_seconds=30)
    assert (report.redelivered, report.acknowledged) == (1, 0)
    assert [(o.kind, o.detail, o.attempt) for o in world.recorded()] == [
        (OutcomeKind.LINK_FAILED, "transactions_unavailable", 1)
    ]
    assert _on_queue(sqs, queue_url) == (0, 1)  # in flight until its visibility timeout


def test_a_refused_link_is_recorded_failed_and_acknowledged(world: World, sqs: Any) -> None:
    world.parts.service.signup("u-1")
    world.fake.transactions_statuses = [404]  # no primary account
    queue_url = _queue(sqs)
    enqueue_relinks(sqs, queue_url, ["u-1"])
    report = _worker(world, sqs, queue_url).drain(max_seconds=30)
    assert (report.failed, report.acknowledged) == (1, 1)
    assert [o.detail for o in world.recorded()] == ["no_primary_account"]


def test_a_body_that_is_not_a_job_is_left_for_the_dead_letter_queue(world: World, sqs: Any) -> None:
    queue_url = _queue(sqs)
    sqs.send_message(QueueUrl=queue_url, MessageBody="not a job")
    report = _worker(world, sqs, queue_url).drain(max_seconds=30)
    assert (report.unreadable, report.acknowledged) == (1, 0)
    assert world.recorded() == []
    assert _on_queue(sqs, queue_url) == (0, 1)


def test_all_active_enqueues_one_job_per_user_holding_an_active_row(world: World, sqs: Any) -> None:
    for user in ("u-1", "u-2", "u-3"):
        world.parts.service.signup(user)
    world.parts.service.cancel("u-2")
    queue_url = _queue(sqs)
    sent = enqueue_relinks(sqs, queue_url, world.table.active_user_ids())
    report = _worker(world, sqs, queue_url).drain(max_seconds=30)
    assert sent == 2
    assert sorted(o.user_id or "" for o in world.recorded()) == ["u-1", "u-3"]
    assert report.linked == 2


def test_the_worker_looks_its_queue_up_and_refuses_with_the_setup_command_when_missing(
    moto_endpoint: str,
) -> None:
    settings = Settings(
        aws=AwsSettings(endpoint_url=moto_endpoint),
        service=ServiceSettings(relinker_queue_name=f"missing-{uuid.uuid4().hex[:8]}"),
    )
    with pytest.raises(compose.SetupMissingError, match="entitlements relinker setup"):
        compose.relink_queue(settings)
    queues = compose.setup_relink_queues(settings)
    assert compose.relink_queue(settings)[1] == queues.queue_url
