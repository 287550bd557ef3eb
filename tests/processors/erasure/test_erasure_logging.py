"""Canary tests: with the root logger at DEBUG (configured as the entry points configure it), no log
line of the worker holds a body, a key, a requestId, an address or a user id, whatever it handles."""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from devstack.fake_array import FakeArrayServer
from entitlements._logging import configure_logging
from schema.erasure import CheckRequest, EraseRequest, RefileRequest
from tests.processors.erasure.erasure_subscriber_helpers import (
    Stack,
    check,
    cleanup_item,
    entitlement_item,
    erase,
)

CANARY = f"canary{uuid.uuid4().hex[:8]}"
# Loggers of the in-process moto server (it logs the requests it serves): not the worker's lines.
NOT_THE_WORKER = ("moto", "werkzeug")


class _Capture(logging.Handler):
    def __init__(self, formatter: logging.Formatter | None) -> None:
        super().__init__(level=logging.DEBUG)
        self.lines: list[str] = []
        if formatter is not None:
            self.setFormatter(formatter)

    def emit(self, record: logging.LogRecord) -> None:
        if record.name.startswith(NOT_THE_WORKER):
            return
        self.lines.append(self.format(record))  # the line as the entry point writes it
        self.lines.append(record.getMessage())  # and with any arguments interpolated
        self.lines.append(json.dumps(record.__dict__, default=str))  # and every attribute


@pytest.fixture
def captured() -> Iterator[_Capture]:
    root = logging.getLogger()
    saved_handlers, saved_level = list(root.handlers), root.level
    configure_logging("DEBUG")
    capture = _Capture(root.handlers[0].formatter)
    root.addHandler(capture)
    try:
        yield capture
    finally:
        root.handlers[:] = saved_handlers
        root.setLevel(saved_level)


def test_no_log_line_of_the_worker_holds_a_body_key_request_id_or_address(
    captured: _Capture, make_stack: Any, dynamodb: Any, table: Any, fake_array: FakeArrayServer
) -> None:
    user = f"{CANARY}-user"
    dynamodb.put_item(TableName=table.table_name, Item=entitlement_item(user, f"{CANARY}-arr", "Active"))
    dynamodb.put_item(
        TableName=table.table_name, Item=cleanup_item(user, f"{CANARY}-old", cancellation=False)
    )
    fake_array.add_users([f"{CANARY}-arr"])
    stack: Stack = make_stack(handler_timeout_seconds=0.5, batch_timeout_seconds=0.5)
    expires = datetime.now(UTC) + timedelta(hours=1)
    address = f"{CANARY}@example.com"
    requests: list[Any] = [
        check(user, request_id=f"{CANARY}-check"),
        erase(user, request_id=f"{CANARY}-erase"),
        erase(user, request_id=f"{CANARY}-expired", expires_in=-5),
        EraseRequest(
            request_id=f"{CANARY}-addr", send_no=1, expires_at=expires, key_kind="ADDRESS", key=address
        ),
        CheckRequest(request_id=f"{CANARY}-addr-check", expires_at=expires, key_kind="ADDRESS", key=address),
        RefileRequest(
            request_id=f"{CANARY}-refile",
            send_no=1,
            expires_at=expires,
            key_kind="ADDRESS",
            from_=address,
            to="quarantine+canary@erasure.invalid",
            account_id=user,
        ),
    ]
    for request in requests:
        stack.publish(request)
    stack.publish(json.dumps({"type": "erasure/ERASE", "requestId": f"{CANARY}-bad", "key": address}))
    stack.publish(f"not json {CANARY}")
    # Until the ERASE is done (a batch that outlived its 0.5 s deadline on a loaded machine answers again
    # on redelivery, so the count of answers alone says nothing), then every request was answered.
    stack.drive(lambda: stack.worker.stats.done >= 1)
    answered = {answer.request_id for answer in stack.responses.collect()}
    assert answered == {r.request_id for r in requests} - {f"{CANARY}-expired"}  # the expired one: no answer
    assert stack.worker.stats.refused >= 2
    assert any("erasure message refused" in line for line in captured.lines)
    assert any("erasure pass" in line for line in captured.lines)
    leaking = [line for line in captured.lines if CANARY in line]
    assert leaking == []
