"""The erasure worker: a long-poll loop on the store's own SQS queue, which the erasure SNS topic feeds
with raw message delivery (so each body is the published message) and no filter policy.

Each received batch follows the contract's steps, for every message in turn:

1. **Validate** with `parse_erasure_request`. An invalid body raises, and the message is not deleted:
   SQS makes it visible again after the visibility timeout and, after maxReceiveCount receives, moves it
   to the dead-letter queue. Nothing is answered for it.
2. **Expiry**, by the store's own clock: an expired valid message is deleted with no answer at all.
3. **Dispatch** on (type, keyKind) through the one capability table (`CAPABILITIES`). A pair this store
   does not implement is answered at once with NOT_APPLICABLE and counted in the CloudWatch metric
   `ErasureNotApplicable` (namespace `settings.metrics_namespace`); CHECK and CLASSIFY by ACCOUNT are
   answered HOLDS_DATA, HOLDS_NONE or CANNOT_ANSWER; ERASE by ACCOUNT runs a pass of the erasure.
4. **Answer** through `ErasureResponseSender`, with `subscriber` from the settings, never the message.

Two passes: the first pass re-enqueues the message's own body on the store's queue with `DelaySeconds`
= the pass-two delay and the message attribute `ErasurePass` = 2 (the contract forbids extra body
fields; the attribute is on the store's own copy, never on the topic), then deletes the original. The
second pass repeats the whole erasure (catching what landed in between), completes the ledger entry,
unmasks the account in the lake, records an `erasure.completed` outcome and sends the ACK (DONE, echoing
sendNo). Any message that fails is left for redelivery; every step is idempotent.

Time: one deadline of `handler_timeout_seconds` per received batch bounds every message's handling; each
call is bounded by `batch_timeout_seconds`; the queue's visibility timeout is exactly 6 x the handler
timeout (checked by `verify_queue`). Logs hold counts and codes only: never a body, a key, a requestId,
an address or a user id.
"""

from __future__ import annotations

__all__ = [
    "MAX_MESSAGES",
    "NOT_APPLICABLE_METRIC",
    "PASS_ATTRIBUTE",
    "BatchReport",
    "ErasureWorker",
    "OutcomeRecorder",
    "WorkerStats",
]

import json
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any, Protocol

from config import ErasureSettings
from pipeline.clock import Clock
from processors.erasure._bounded import BoundedCalls, Deadline
from processors.erasure._capabilities import Handling, handling_for, not_applicable_answer
from processors.erasure._clients import CloudWatchClient, ErasureSqsClient
from processors.erasure._config import ErasureTimings, checked_timings
from processors.erasure._errors import (
    ErasureConfigError,
    ErasurePassAttributeError,
    aws_error_code,
    converted,
)
from processors.erasure._ledger import ERASE_PASSES
from processors.erasure._procedure import AccountErasure, ErasureTargets
from schema.erasure import (
    AckResponse,
    CheckRequest,
    ClassifyRequest,
    EraseRequest,
    ErasureContractError,
    ErasureRequest,
    ErasureResponse,
    ErasureResponseSender,
    HoldingsResponse,
    is_expired,
    parse_erasure_request,
)
from schema.errors import EntitlementsError
from schema.outcomes import OutcomeEvent, OutcomeKind, outcome_id

logger = logging.getLogger(__name__)

PASS_ATTRIBUTE = "ErasurePass"  # noqa: S105 (an attribute name)
NOT_APPLICABLE_METRIC = "ErasureNotApplicable"
MAX_MESSAGES = 10  # SQS's most per receive
_PASS_TWO = str(ERASE_PASSES)
_ERROR_PAUSE_SECONDS = 1.0


class OutcomeRecorder(Protocol):
    """Where `erasure.completed` outcomes go (the lake's `LakeHandler` has both calls)."""

    def add_outcome(self, outcome: OutcomeEvent) -> None: ...

    def flush(self) -> None: ...


@dataclass(slots=True)
class WorkerStats:
    """Counts since the worker was made (no personal data: safe to log)."""

    batches: int = 0
    received: int = 0
    refused: int = 0  # invalid body or pass attribute: left for SQS to dead-letter
    expired: int = 0  # consumed with no answer
    not_applicable: int = 0
    holdings: int = 0
    pass_one: int = 0  # first passes done and re-enqueued
    done: int = 0  # second passes done and ACKed
    failed: int = 0  # left for redelivery after a failed step
    metric_failures: int = 0

    def add(self, report: BatchReport) -> None:
        self.batches += 1
        for field in fields(report):
            setattr(self, field.name, getattr(self, field.name) + getattr(report, field.name))


@dataclass(slots=True)
class BatchReport:
    received: int = 0
    refused: int = 0
    expired: int = 0
    not_applicable: int = 0
    holdings: int = 0
    pass_one: int = 0
    done: int = 0
    failed: int = 0
    metric_failures: int = 0


@dataclass(frozen=True, slots=True)
class _Job:
    body: str
    receipt: str
    request: ErasureRequest
    pass_number: int


def _pass_number(message: Mapping[str, Any]) -> int:
    attribute = (message.get("MessageAttributes") or {}).get(PASS_ATTRIBUTE)
    if attribute is None:
        return 1
    if attribute.get("DataType") == "Number" and attribute.get("StringValue") == _PASS_TWO:
        return ERASE_PASSES
    raise ErasurePassAttributeError


def _receive_count(message: Mapping[str, Any]) -> int:
    raw = (message.get("Attributes") or {}).get("ApproximateReceiveCount", "0")
    return int(raw) if isinstance(raw, str) and raw.isdigit() else 0


class ErasureWorker:
    """Construct it with the deployed settings (refused with `ErasureConfigError` above any cap), the
    clients, the store's queue URL and the responses queue URL, and where the data lives (`targets`).
    `poll_once` handles one receive; `run` loops until `stop` is set."""

    def __init__(
        self,
        *,
        settings: ErasureSettings,
        sqs: ErasureSqsClient,
        cloudwatch: CloudWatchClient,
        queue_url: str,
        responses_queue_url: str,
        targets: ErasureTargets,
        clock: Clock,
        outcomes: OutcomeRecorder | None = None,
        max_call_threads: int = 8,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._timings: ErasureTimings = checked_timings(settings)
        if not settings.subscriber:
            raise ErasureConfigError("the erasure subscriber name must not be empty")
        self._subscriber = settings.subscriber
        self._namespace = settings.metrics_namespace
        self._sqs = sqs
        self._cloudwatch = cloudwatch
        self._queue_url = queue_url
        self._sender = ErasureResponseSender(sqs, responses_queue_url)
        self._clock = clock
        self._outcomes = outcomes
        self._monotonic = monotonic
        self._calls = BoundedCalls(max_workers=max_call_threads)
        self._erasure = AccountErasure(
            targets, self._calls, batch_timeout=self._timings.batch_timeout_seconds, clock=clock
        )
        self.stats = WorkerStats()

    @property
    def timings(self) -> ErasureTimings:
        return self._timings

    def close(self) -> None:
        self._calls.close()

    def __enter__(self) -> ErasureWorker:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- start-up -----------------------------------------------------------------------------------

    def verify_queue(self) -> None:
        """Refuse to start unless the queue's visibility timeout is exactly 6 x the handler timeout and
        its redrive policy dead-letters after the configured maxReceiveCount."""
        with converted("queue-attributes"):
            attributes = self._sqs.get_queue_attributes(
                QueueUrl=self._queue_url, AttributeNames=["VisibilityTimeout", "RedrivePolicy"]
            ).get("Attributes", {})
        visibility = attributes.get("VisibilityTimeout")
        if visibility != str(self._timings.visibility_timeout_seconds):
            raise ErasureConfigError(
                f"the queue's visibility timeout is {visibility}, not "
                f"{self._timings.visibility_timeout_seconds} (6 x the handler timeout): run erasure setup"
            )
        try:
            redrive = json.loads(attributes.get("RedrivePolicy") or "{}")
            receives = int(redrive.get("maxReceiveCount", 0))
        except (ValueError, TypeError, AttributeError):
            receives = 0
        if receives != self._timings.max_receive_count or not redrive.get("deadLetterTargetArn"):
            raise ErasureConfigError(
                f"the queue does not dead-letter after {self._timings.max_receive_count} receives: "
                "run erasure setup"
            )

    # -- the loop -----------------------------------------------------------------------------------

    def run(self, stop: threading.Event, *, wait_seconds: int = 20) -> WorkerStats:
        """Verify the queue, then poll until `stop` is set (within one long poll)."""
        self.verify_queue()
        logger.info("erasure worker started", extra={"subscriber": self._subscriber})
        while not stop.is_set():
            try:
                self.poll_once(wait_seconds)
            except EntitlementsError as error:
                logger.error("erasure poll failed", extra={"code": getattr(error, "code", "error")})
                stop.wait(_ERROR_PAUSE_SECONDS)
        logger.info("erasure worker stopped", extra=self._stats_extra())
        return self.stats

    def poll_once(self, wait_seconds: int = 20) -> BatchReport:
        """One long poll of at most `wait_seconds` (0 to 20), and the handling of what it received."""
        with converted("receive"):
            response = self._sqs.receive_message(
                QueueUrl=self._queue_url,
                MaxNumberOfMessages=MAX_MESSAGES,
                WaitTimeSeconds=max(0, min(20, wait_seconds)),
                MessageAttributeNames=[PASS_ATTRIBUTE],
                AttributeNames=["ApproximateReceiveCount"],
            )
        return self.handle(response.get("Messages") or [])

    def handle(self, messages: Sequence[Mapping[str, Any]]) -> BatchReport:
        """Handle one received batch under one handler deadline."""
        report = BatchReport(received=len(messages))
        if not messages:
            return report
        deadline = Deadline(self._timings.handler_timeout_seconds, monotonic=self._monotonic)
        now = self._clock.now()
        not_applicable: list[_Job] = []
        holdings: list[_Job] = []
        erasures: list[_Job] = []
        for message in messages:
            job = self._validated(message, report)
            if job is None:
                continue
            if is_expired(job.request, now):
                self._consume_expired(job, deadline, report)
                continue
            handling = handling_for(job.request)
            if handling is Handling.NOT_APPLICABLE:
                not_applicable.append(job)
            elif handling is Handling.HOLDINGS_ACCOUNT:
                holdings.append(job)
            else:
                erasures.append(job)
        self._answer_not_applicable(not_applicable, deadline, report)
        for job in holdings:
            self._answer_holdings(job, deadline, report)
        if erasures:
            self._erase(erasures, deadline, report)
        self.stats.add(report)
        logger.info("erasure batch", extra={f.name: getattr(report, f.name) for f in fields(report)})
        return report

    # -- steps --------------------------------------------------------------------------------------

    def _validated(self, message: Mapping[str, Any], report: BatchReport) -> _Job | None:
        """Steps 1: the typed request, or None for a refused message, which stays on the queue."""
        body = message.get("Body")
        receipt = message.get("ReceiptHandle")
        if not isinstance(receipt, str):
            report.refused += 1
            return None
        try:
            request = parse_erasure_request(body if isinstance(body, str) else "")
            pass_number = _pass_number(message)
        except (ErasureContractError, ErasurePassAttributeError) as error:
            report.refused += 1
            logger.warning(
                "erasure message refused",
                extra={"code": str(error.code), "receive_count": _receive_count(message)},
            )
            return None
        assert isinstance(body, str)
        return _Job(body=body, receipt=receipt, request=request, pass_number=pass_number)

    def _consume_expired(self, job: _Job, deadline: Deadline, report: BatchReport) -> None:
        try:
            self._delete(job, deadline)
        except EntitlementsError as error:
            self._failed(job, error, report)
            return
        report.expired += 1
        logger.info("expired erasure request consumed", extra={"type": job.request.type})

    def _answer_not_applicable(self, jobs: list[_Job], deadline: Deadline, report: BatchReport) -> None:
        answered = 0
        for job in jobs:
            try:
                self._send(not_applicable_answer(job.request, self._subscriber), deadline)
                answered += 1
                self._delete(job, deadline)
            except EntitlementsError as error:
                self._failed(job, error, report)
                continue
            report.not_applicable += 1
        if answered:
            self._count_not_applicable(answered, deadline, report)

    def _count_not_applicable(self, count: int, deadline: Deadline, report: BatchReport) -> None:
        """One datum per batch. A failure is logged and counted, not retried: the answers are sent."""

        def put() -> None:
            with converted("metric"):
                self._cloudwatch.put_metric_data(
                    Namespace=self._namespace,
                    MetricData=[
                        {"MetricName": NOT_APPLICABLE_METRIC, "Value": float(count), "Unit": "Count"}
                    ],
                )

        try:
            self._calls.call("metric", put, deadline, self._timings.batch_timeout_seconds)
        except EntitlementsError as error:
            report.metric_failures += 1
            logger.error(
                "ErasureNotApplicable metric not sent",
                extra={"code": getattr(error, "code", "error"), "count": count},
            )

    def _answer_holdings(self, job: _Job, deadline: Deadline, report: BatchReport) -> None:
        request = job.request
        assert isinstance(request, CheckRequest | ClassifyRequest)
        try:
            answer = self._erasure.holdings(request.key, deadline)
            self._send(
                HoldingsResponse(
                    request_id=request.request_id,
                    subscriber=self._subscriber,
                    key_kind=request.key_kind,
                    key=request.key,
                    answer=answer,
                ),
                deadline,
            )
            self._delete(job, deadline)
        except EntitlementsError as error:
            self._failed(job, error, report)
            return
        report.holdings += 1

    def _erase(self, jobs: list[_Job], deadline: Deadline, report: BatchReport) -> None:
        user_ids = [job.request.key for job in jobs if isinstance(job.request, EraseRequest)]
        results = self._erasure.erase(user_ids, deadline)
        for job in jobs:
            request = job.request
            assert isinstance(request, EraseRequest)
            error = results.get(request.key)
            if error is not None:
                self._failed(job, error, report)
                continue
            try:
                if job.pass_number < ERASE_PASSES:
                    self._finish_pass_one(job, deadline)
                    report.pass_one += 1
                else:
                    self._finish_pass_two(job, request, deadline)
                    report.done += 1
            except EntitlementsError as failure:
                self._failed(job, failure, report)

    def _finish_pass_one(self, job: _Job, deadline: Deadline) -> None:
        ledger = self._erasure.targets.ledger
        user_id = job.request.key if isinstance(job.request, EraseRequest) else ""
        now = self._clock.now()
        batch = self._timings.batch_timeout_seconds
        self._calls.call("ledger", lambda: ledger.record_pass(user_id, 1, now), deadline, batch)

        def enqueue() -> None:
            with converted("pass-two-enqueue"):
                self._sqs.send_message(
                    QueueUrl=self._queue_url,
                    MessageBody=job.body,
                    DelaySeconds=self._timings.pass_two_delay_seconds,
                    MessageAttributes={PASS_ATTRIBUTE: {"DataType": "Number", "StringValue": _PASS_TWO}},
                )

        self._calls.call("pass-two-enqueue", enqueue, deadline, batch)
        self._delete(job, deadline)

    def _finish_pass_two(self, job: _Job, request: EraseRequest, deadline: Deadline) -> None:
        targets = self._erasure.targets
        user_id = request.key
        now = self._clock.now()
        batch = self._timings.batch_timeout_seconds
        self._calls.call(
            "ledger", lambda: targets.ledger.record_pass(user_id, ERASE_PASSES, now), deadline, batch
        )
        self._calls.call("lake-unmask", lambda: targets.lake.unmask([user_id]), deadline, batch)
        if self._outcomes is not None:
            self._record_outcome(targets.ledger.ledger_id(user_id), now, deadline)
        self._send(
            AckResponse(
                request_id=request.request_id,
                send_no=request.send_no,
                subscriber=self._subscriber,
                outcome="DONE",
            ),
            deadline,
        )
        self._delete(job, deadline)

    def _record_outcome(self, ledger_id: str, now: datetime, deadline: Deadline) -> None:
        recorder = self._outcomes
        assert recorder is not None
        outcome = OutcomeEvent(
            outcome_id=outcome_id(f"erasure:{ledger_id}", OutcomeKind.ERASURE_COMPLETED),
            kind=OutcomeKind.ERASURE_COMPLETED,
            occurred_at=now,
            user_id=None,  # no personal data: the ledger id links it to the ledger
            array_account_id=None,
            detail=ledger_id,
        )

        def record() -> None:
            recorder.add_outcome(outcome)
            recorder.flush()

        self._calls.call("outcome", record, deadline, self._timings.batch_timeout_seconds)

    # -- calls --------------------------------------------------------------------------------------

    def _send(self, response: ErasureResponse, deadline: Deadline) -> None:
        self._calls.call(
            "answer", lambda: self._sender.send(response), deadline, self._timings.batch_timeout_seconds
        )

    def _delete(self, job: _Job, deadline: Deadline) -> None:
        def delete() -> None:
            with converted("delete-message"):
                self._sqs.delete_message(QueueUrl=self._queue_url, ReceiptHandle=job.receipt)

        self._calls.call("delete-message", delete, deadline, self._timings.batch_timeout_seconds)

    @staticmethod
    def _failed(job: _Job, error: BaseException, report: BatchReport) -> None:
        report.failed += 1
        logger.warning(
            "erasure message left for redelivery",
            extra={
                "type": job.request.type,
                "pass": job.pass_number,
                "step": getattr(error, "step", None),
                "code": getattr(error, "code", None) or aws_error_code(error),
            },
        )

    def _stats_extra(self) -> dict[str, int]:
        return {f.name: getattr(self.stats, f.name) for f in fields(self.stats)}
