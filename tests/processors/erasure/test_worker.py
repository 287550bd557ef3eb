"""The worker is never stopped by what it stores or where: a quarantined record no decoder can read does
not block an ERASE, and a state directory that cannot be written leaves the worker running and the
message on the queue until a retry succeeds."""

from __future__ import annotations

import errno
import os
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from pipeline.quarantine import Quarantine
from schema.erasure import AckResponse
from tests.processors.erasure.erasure_subscriber_helpers import Stack, erase
from tests.processors.erasure.test_record_match import ARN, record

SHARD = "shardId-00000001700000000000-worker"
DEPTH = 1_000


def nested_record(user_id: str) -> bytes:
    """A record of `user_id` with an attribute nested `DEPTH` maps deep (valid JSON, deeper than any
    decoder here reads)."""
    deep = '{"M": {"a": ' * DEPTH + '{"S": "x"}' + "}}" * DEPTH
    text = record(user_id).decode()
    return text.replace('"status": {"S": "Active"}', f'"status": {{"S": "Active"}}, "deep": {deep}').encode()


def _wait_for(condition: Any, *, timeout: float = 60.0) -> None:
    stop_at = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > stop_at:
            raise AssertionError("the condition did not hold in time")
        time.sleep(0.1)


def test_a_quarantined_record_of_the_user_nested_1000_deep_is_erased_and_the_erase_answered_done(
    make_stack: Any, state_dir: Path
) -> None:
    user, other = (f"{name}-{uuid.uuid4().hex[:8]}" for name in ("user", "other"))
    quarantine = Quarantine(state_dir / "quarantine")
    for sequence_number, user_id in (("1", user), ("2", other)):
        quarantine.put(
            raw=nested_record(user_id),
            reason="r",
            stream_arn=ARN,
            shard_id=SHARD,
            sequence_number=sequence_number,
        )
    stack: Stack = make_stack()
    request = erase(user)
    stack.publish(request)
    answer = stack.answer_to(request.request_id)
    assert isinstance(answer, AckResponse) and answer.outcome == "DONE"
    assert [(kept.sequence_number, kept.raw) for kept in quarantine] == [("2", nested_record(other))]


def test_a_full_state_disk_leaves_the_worker_running_and_the_erase_retried_until_answered(
    make_stack: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    stack: Stack = make_stack(handler_timeout_seconds=0.5, batch_timeout_seconds=0.5)  # redelivery after 3 s

    def full_disk(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full_disk)  # every state file is written whole and fsynced
    stop = threading.Event()
    runner = threading.Thread(target=stack.worker.run, args=(stop,), kwargs={"wait_seconds": 1})
    runner.start()
    try:
        request = erase(f"user-{uuid.uuid4().hex[:8]}")
        stack.publish(request)
        _wait_for(lambda: stack.worker.stats.failed >= 1)
        assert runner.is_alive() and stack.responses.collect() == []
        monkeypatch.undo()  # room on the disk again
        _wait_for(lambda: bool(stack.responses.for_request(request.request_id)))
    finally:
        stop.set()
        runner.join(timeout=30)
    [answer] = stack.responses.for_request(request.request_id)
    assert isinstance(answer, AckResponse) and answer.outcome == "DONE"
