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

Two passes, and the second is the store's own decision: the first pass records pass one in the ledger
and re-enqueues the message's own body on the store's queue with `DelaySeconds` = the pass-two delay and
the message attribute `ErasurePassTwoToken` = the ledger's `pass_two_token(body)` (an HMAC under a key
derived from the ledger key: the contract forbids extra body fields, and no publisher can make the
token), then deletes the original. A message is a second pass only when its token verifies for its body
and the ledger shows pass one finished (`ErasureLedger.is_pass_two`); anything else, whatever attribute
a publisher set (`ErasurePass = 2` included), is a first pass. The second pass repeats the whole erasure
(catching what landed in between) and verifies it (`_receipt.verify_erasure`: every store scanned, the
receipt kept in the ledger); only a clean receipt completes the ledger entry, unmasks the account in the
lake, lands an `erasure.completed` outcome carrying the receipt (flushed) and sends the ACK (DONE,
echoing sendNo). A receipt with a trace sends nothing: the message is left for redelivery and counted in
`entitlements_erasure_traces_found`. Any message that fails is left
for redelivery; every step is idempotent. A state file that cannot be read or written (a full disk, a
read-only state directory) fails its step like any other, as a retryable `ErasureStateError` converted
where the files are touched, so the worker keeps running.

Time: one deadline of `handler_timeout_seconds` per received batch bounds every message's handling; each
call is bounded by `batch_timeout_seconds`; the queue's visibility timeout is exactly 6 x the handler
timeout (checked by `verify_queue`). Logs hold counts and codes only: never a body, a key, a requestId,
an address or a user id.
"""

from __future__ import annotations

__all__ = [
    "MAX_MESSAGES",
    "NOT_APPLICABLE_METRIC",
    "PASS_TWO_TOKEN_ATTRIBUTE",
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
from dataclasses import dataclass, field, fields
from functools import partial
from typing import Any, Protocol

import telemetry
from config import ErasureSettings
from pipeline.clock import Clock
from processors.erasure._bounded import BoundedCalls, Deadline, Parallel
from processors.erasure._capabilities import Handling, handling_for, not_applicable_answer
from processors.erasure._clients import CloudWatchClient, ErasureSqsClient
from processors.erasure._config import ErasureTimings, checked_timings
from processors.erasure._errors import (
    ErasureConfigError,
    ErasureStepError,
    aws_error_code,
    converted,
)
from processors.erasure._ledger import ERASE_PASSES, LedgerEntry
from processors.erasure._procedure import AccountErasure, ErasureTargets
from processors.erasure._receipt import ErasureReceipt, verify_erasure
from processors.erasure._table import UserTable
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

PASS_TWO_TOKEN_ATTRIBUTE = "ErasurePassTwoToken"  # noqa: S105 (an attribute name, not a secret)
NOT_APPLICABLE_METRIC = "ErasureNotApplicable"
MAX_MESSAGES = 10  # SQS's most per receive
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
    refused: int = 0  # invalid body: left for SQS to dead-letter
    expired: int = 0  # consumed with no answer
    not_applicable: int = 0
    holdings: int = 0
    pass_one: int = 0  # first passes done and re-enqueued
    done: int = 0  # second passes done and ACKed
    failed: int = 0  # left for redelivery after a failed step
    metric_failures: int = 0

    def add(self, report: BatchReport) -> None:
        self.batches += 1
        for counter in fields(report):
            setattr(self, counter.name, getattr(self, counter.name) + getattr(report, counter.name))


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


@dataclass(slots=True)
class _Job:
    body: str
    receipt: str
    request: ErasureRequest
    token: str | None  # the pass-two token the message carries, if any (verified in `_erase`)
    pass_number: int = 1


@dataclass(slots=True)
class _Batch:
    """One received batch: its report, its deadline and the messages it consumed (to delete)."""

    report: BatchReport
    deadline: Deadline
    consumed: list[tuple[_Job, str]] = field(default_factory=list)


def _account(job: _Job) -> str:
    return job.request.key if isinstance(job.request, EraseRequest) else ""


def _pass_two_token(message: Mapping[str, Any]) -> str | None:
    attribute = (message.get("MessageAttributes") or {}).get(PASS_TWO_TOKEN_ATTRIBUTE)
    if not isinstance(attribute, Mapping) or attribute.get("DataType") != "String":
        return None
    value = attribute.get("StringValue")
    return value if isinstance(value, str) else None


def _cycle(entry: LedgerEntry) -> str:
    """An erasure cycle's mark (its completion time): each cycle of one account lands its own outcome."""
    return entry.completed_at.isoformat() if entry.completed_at is not None else ""


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
        concurrency: int = 8,
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
        if concurrency < 1:
            raise ErasureConfigError("concurrency must be at least 1")
        # Each parallel task waits on at most one bounded call at a time; the margin absorbs calls
        # abandoned after their budget.
        self._calls = BoundedCalls(max_workers=2 * concurrency + 4)
        self._parallel = Parallel(concurrency)
        self._erasure = AccountErasure(
            targets,
            self._calls,
            batch_timeout=self._timings.batch_timeout_seconds,
            clock=clock,
            parallel=self._parallel,
        )
        self._table = UserTable(
            targets.dynamodb, targets.table_name, self._calls, self._timings.batch_timeout_seconds
        )
        self.stats = WorkerStats()
        self._stats_lock = threading.Lock()

    @property
    def timings(self) -> ErasureTimings:
        return self._timings

    def close(self) -> None:
        """Write the outcomes still buffered, then stop the worker's threads."""
        try:
            if self._outcomes is not None:
                self._outcomes.flush()
        except Exception as error:  # closing must not raise; the ledger holds the truth
            logger.error("erasure outcomes not flushed", extra={"code": type(error).__name__})
        finally:
            self._parallel.close()
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

    def run(self, stop: threading.Event, *, wait_seconds: int = 20, pollers: int = 1) -> WorkerStats:
        """Verify the queue, then poll until `stop` is set (within one long poll). With `pollers` > 1,
        that many loops receive and handle batches at once (as concurrent Lambda invocations would);
        each batch keeps its own deadline, and the lake adapter serialises its purges."""
        if pollers < 1:
            raise ErasureConfigError("pollers must be at least 1")
        self.verify_queue()
        logger.info("erasure worker started", extra={"subscriber": self._subscriber, "pollers": pollers})
        loops = [
            threading.Thread(target=self._poll_until, args=(stop, wait_seconds), name=f"erasure-poller-{n}")
            for n in range(pollers - 1)
        ]
        for loop in loops:
            loop.start()
        self._poll_until(stop, wait_seconds)
        for loop in loops:
            loop.join()
        logger.info("erasure worker stopped", extra=self._stats_extra())
        return self.stats

    def _poll_until(self, stop: threading.Event, wait_seconds: int) -> None:
        while not stop.is_set():
            try:
                self.poll_once(wait_seconds)
            except EntitlementsError as error:
                logger.error("erasure poll failed", extra={"code": getattr(error, "code", "error")})
                stop.wait(_ERROR_PAUSE_SECONDS)

    def poll_once(self, wait_seconds: int = 20) -> BatchReport:
        """One long poll of at most `wait_seconds` (0 to 20), and the handling of what it received."""
        with converted("receive"):
            response = self._sqs.receive_message(
                QueueUrl=self._queue_url,
                MaxNumberOfMessages=MAX_MESSAGES,
                WaitTimeSeconds=max(0, min(20, wait_seconds)),
                MessageAttributeNames=[PASS_TWO_TOKEN_ATTRIBUTE],
                AttributeNames=["ApproximateReceiveCount"],
            )
        return self.handle(response.get("Messages") or [])

    def handle(self, messages: Sequence[Mapping[str, Any]]) -> BatchReport:
        """Handle one received batch under one handler deadline."""
        report = BatchReport(received=len(messages))
        if not messages:
            return report
        batch = _Batch(report, Deadline(self._timings.handler_timeout_seconds, monotonic=self._monotonic))
        now = self._clock.now()
        not_applicable: list[_Job] = []
        holdings: list[_Job] = []
        erasures: list[_Job] = []
        for message in messages:
            job = self._validated(message, report)
            if job is None:
                continue
            if is_expired(job.request, now):
                batch.consumed.append((job, "expired"))  # no answer at all
                continue
            handling = handling_for(job.request)
            if handling is Handling.NOT_APPLICABLE:
                not_applicable.append(job)
            elif handling is Handling.HOLDINGS_ACCOUNT:
                holdings.append(job)
            else:
                erasures.append(job)
        self._answer_not_applicable(not_applicable, batch)
        for job in holdings:
            self._answer_holdings(job, batch)
        if erasures:
            self._erase(erasures, batch)
        self._delete_consumed(batch)
        with self._stats_lock:
            self.stats.add(report)
        logger.info("erasure batch", extra={f.name: getattr(report, f.name) for f in fields(report)})
        return report

    # -- steps --------------------------------------------------------------------------------------

    def _validated(self, message: Mapping[str, Any], report: BatchReport) -> _Job | None:
        """Step 1: the typed request, or None for a refused message, which stays on the queue."""
        body = message.get("Body")
        receipt = message.get("ReceiptHandle")
        if not isinstance(receipt, str):
            report.refused += 1
            return None
        try:
            request = parse_erasure_request(body if isinstance(body, str) else "")
        except ErasureContractError as error:
            report.refused += 1
            logger.warning(
                "erasure message refused",
                extra={"code": str(error.code), "receive_count": _receive_count(message)},
            )
            return None
        assert isinstance(body, str)
        return _Job(body=body, receipt=receipt, request=request, token=_pass_two_token(message))

    def _answer_not_applicable(self, jobs: list[_Job], batch: _Batch) -> None:
        answered = 0
        for job in jobs:
            try:
                self._send(not_applicable_answer(job.request, self._subscriber), batch.deadline)
            except EntitlementsError as error:
                self._failed(job, error, batch.report)
                continue
            answered += 1
            batch.consumed.append((job, "not_applicable"))
        if answered:
            telemetry.erasure_not_applicable(answered)
            self._count_not_applicable(answered, batch)

    def _count_not_applicable(self, count: int, batch: _Batch) -> None:
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
            self._calls.call("metric", put, batch.deadline, self._timings.batch_timeout_seconds)
        except EntitlementsError as error:
            batch.report.metric_failures += 1
            logger.error(
                "ErasureNotApplicable metric not sent",
                extra={"code": getattr(error, "code", "error"), "count": count},
            )

    def _answer_holdings(self, job: _Job, batch: _Batch) -> None:
        request = job.request
        assert isinstance(request, CheckRequest | ClassifyRequest)
        try:
            answer = self._erasure.holdings(request.key, batch.deadline)
            self._send(
                HoldingsResponse(
                    request_id=request.request_id,
                    subscriber=self._subscriber,
                    key_kind=request.key_kind,
                    key=request.key,
                    answer=answer,
                ),
                batch.deadline,
            )
        except EntitlementsError as error:
            self._failed(job, error, batch.report)
            return
        batch.consumed.append((job, "holdings"))

    def _erase(self, jobs: list[_Job], batch: _Batch) -> None:
        jobs = self._passes_decided(jobs, batch)
        if not jobs:
            return
        user_ids = [_account(job) for job in jobs]
        results, removed = self._erasure.erase_counted(user_ids, batch.deadline)
        firsts: list[_Job] = []
        finals: list[_Job] = []
        for job in jobs:
            error = results.get(_account(job))
            if error is not None:
                self._failed(job, error, batch.report)
            elif job.pass_number < ERASE_PASSES:
                firsts.append(job)
            else:
                finals.append(job)
        if firsts:
            firsts = self._pass_one_recorded(firsts, batch, removed)
        if firsts:
            self._enqueue_pass_two(firsts, batch)
        if finals:
            try:
                withheld = self._complete(finals, batch.deadline, removed)
            except EntitlementsError as error:
                for job in finals:
                    self._failed(job, error, batch.report)
                return
            for job in finals:
                if _account(job) in withheld:
                    self._failed(job, withheld[_account(job)], batch.report)
            finals = [job for job in finals if _account(job) not in withheld]
            acks = self._parallel.map(lambda job: self._acknowledge(job, batch.deadline), finals)
            for job, failure in zip(finals, acks, strict=True):
                if failure is None:
                    batch.consumed.append((job, "done"))
                else:
                    self._failed(job, failure, batch.report)

    def _passes_decided(self, jobs: list[_Job], batch: _Batch) -> list[_Job]:
        """Which pass each ERASE is, from the store's own record: a second pass only when the message's
        token verifies for its body and the ledger shows pass one finished. An account with a first pass
        in this batch takes all its messages as first passes (a new cycle opens for it). Before the
        erasure runs, each first pass's ledger entry is made, opening a new cycle when the account's
        last erasure completed. Returns the jobs whose ledger could be read and written."""
        ledger = self._erasure.targets.ledger
        limit = self._timings.batch_timeout_seconds
        kept: list[_Job] = []
        for job in jobs:
            if job.token is None:
                job.pass_number = 1
                kept.append(job)
                continue
            user_id, token = _account(job), job.token
            try:
                signed = self._calls.call(
                    "ledger", partial(ledger.is_pass_two, user_id, job.body, token), batch.deadline, limit
                )
            except EntitlementsError as error:
                self._failed(job, error, batch.report)
                continue
            job.pass_number = ERASE_PASSES if signed else 1
            if not signed:
                logger.warning("erasure pass-two token not the store's: taken as a first pass")
            kept.append(job)
        restarting = {_account(job) for job in kept if job.pass_number == 1}
        for job in kept:
            if _account(job) in restarting:
                job.pass_number = 1
        now = self._clock.now()

        def start(user_id: str) -> EntitlementsError | None:
            try:
                self._calls.call(
                    "ledger",
                    lambda: ledger.record_started(user_id, now, new_cycle=True),
                    batch.deadline,
                    limit,
                )
            except EntitlementsError as error:
                return error
            return None

        users = sorted(restarting)
        failures = dict(zip(users, self._parallel.map(start, users), strict=True))
        ready: list[_Job] = []
        for job in kept:
            failure = failures.get(_account(job))
            if failure is None:
                ready.append(job)
            else:
                self._failed(job, failure, batch.report)
        return ready

    def _pass_one_recorded(
        self, jobs: list[_Job], batch: _Batch, removed: Mapping[str, Mapping[str, int]]
    ) -> list[_Job]:
        """Record each first pass in the ledger (what a second pass is recognised by) before its delayed
        copy is sent; a job whose record fails is left for redelivery."""
        ledger = self._erasure.targets.ledger
        now = self._clock.now()

        def record(job: _Job) -> EntitlementsError | None:
            user_id = _account(job)
            try:
                self._calls.call(
                    "ledger",
                    lambda: ledger.record_pass(user_id, 1, now, removed=removed.get(user_id)),
                    batch.deadline,
                    self._timings.batch_timeout_seconds,
                )
            except EntitlementsError as error:
                return error
            return None

        recorded: list[_Job] = []
        for job, failure in zip(jobs, self._parallel.map(record, jobs), strict=True):
            if failure is None:
                recorded.append(job)
            else:
                self._failed(job, failure, batch.report)
        return recorded

    def _enqueue_pass_two(self, jobs: list[_Job], batch: _Batch) -> None:
        """Each first pass's own body back on the store's queue, delayed, with the store's pass-two token
        (one SendMessageBatch for the batch); the originals are deleted with the rest of the batch."""
        ledger = self._erasure.targets.ledger
        entries = [
            {
                "Id": str(number),
                "MessageBody": job.body,
                "DelaySeconds": self._timings.pass_two_delay_seconds,
                "MessageAttributes": {
                    PASS_TWO_TOKEN_ATTRIBUTE: {
                        "DataType": "String",
                        "StringValue": ledger.pass_two_token(job.body),
                    }
                },
            }
            for number, job in enumerate(jobs)
        ]

        def send() -> Any:
            with converted("pass-two-enqueue"):
                return self._sqs.send_message_batch(QueueUrl=self._queue_url, Entries=entries)

        try:
            response = self._calls.call(
                "pass-two-enqueue", send, batch.deadline, self._timings.batch_timeout_seconds
            )
        except EntitlementsError as error:
            for job in jobs:
                self._failed(job, error, batch.report)
            return
        failed = {
            str(entry.get("Id")): str(entry.get("Code", "error")) for entry in response.get("Failed") or []
        }
        for number, job in enumerate(jobs):
            code = failed.get(str(number))
            if code is None:
                batch.consumed.append((job, "pass_one"))
            else:
                self._failed(job, ErasureStepError("pass-two-enqueue", code), batch.report)

    def _acknowledge(self, job: _Job, deadline: Deadline) -> EntitlementsError | None:
        request = job.request
        assert isinstance(request, EraseRequest)
        try:
            self._send(
                AckResponse(
                    request_id=request.request_id,
                    send_no=request.send_no,
                    subscriber=self._subscriber,
                    outcome="DONE",
                ),
                deadline,
            )
        except EntitlementsError as error:
            return error
        return None

    def _delete_consumed(self, batch: _Batch) -> None:
        """Delete every message the batch consumed (one DeleteMessageBatch per 10), counting each under
        what consumed it; a message whose delete fails is redelivered, and answered again, harmlessly."""
        consumed = batch.consumed
        for start in range(0, len(consumed), MAX_MESSAGES):
            chunk = consumed[start : start + MAX_MESSAGES]
            entries = [{"Id": str(n), "ReceiptHandle": job.receipt} for n, (job, _) in enumerate(chunk)]

            def delete(entries: list[dict[str, str]] = entries) -> Any:
                with converted("delete-message"):
                    return self._sqs.delete_message_batch(QueueUrl=self._queue_url, Entries=entries)

            try:
                response = self._calls.call(
                    "delete-message", delete, batch.deadline, self._timings.batch_timeout_seconds
                )
            except EntitlementsError as error:
                for job, _ in chunk:
                    self._failed(job, error, batch.report)
                continue
            failed = {
                str(entry.get("Id")): str(entry.get("Code", "error"))
                for entry in response.get("Failed") or []
            }
            for number, (job, counter) in enumerate(chunk):
                code = failed.get(str(number))
                if code is not None:
                    self._failed(job, ErasureStepError("delete-message", code), batch.report)
                    continue
                setattr(batch.report, counter, getattr(batch.report, counter) + 1)
                if counter == "expired":
                    logger.info("expired erasure request consumed", extra={"type": job.request.type})

    def _complete(
        self, finals: list[_Job], deadline: Deadline, removed: Mapping[str, Mapping[str, int]]
    ) -> dict[str, EntitlementsError]:
        """Second passes done: verify each account (`verify_erasure`: every store scanned for a trace)
        and keep its receipt in the ledger; then, for the accounts whose receipt is clean, complete their
        ledger entries, unmask them in the lake (one write for the batch) and land `erasure.completed`
        outcomes carrying the receipt (no personal data), flushed, so that the evidence is durable before
        any ACK goes out. Returns the accounts that must not be answered, with why: a trace found (counted
        in `entitlements_erasure_traces_found`), or a step that failed. Raises when a step for the whole
        batch (the unmask, the outcomes) fails."""
        targets = self._erasure.targets
        ledger = targets.ledger
        user_ids = list(
            dict.fromkeys(job.request.key for job in finals if isinstance(job.request, EraseRequest))
        )
        erased_at = self._clock.now()
        batch = self._timings.batch_timeout_seconds

        def verified(user_id: str) -> ErasureReceipt | EntitlementsError:
            try:
                scans = verify_erasure(self._erasure, self._table, user_id, deadline)
                entry = self._calls.call("ledger", lambda: ledger.entry(user_id), deadline, batch)
                passes = {number: dict(stores) for number, stores in entry.removed.items()} if entry else {}
                passes[str(ERASE_PASSES)] = dict(removed.get(user_id, {}))
                receipt = ErasureReceipt(
                    ledger_id=ledger.ledger_id(user_id),
                    removed=passes,
                    started_at=entry.started_at if entry is not None else erased_at,
                    pass_one_at=entry.pass_one_at if entry is not None else None,
                    erased_at=erased_at,
                    verified_at=self._clock.now(),
                    stores=scans,
                )
                self._calls.call(
                    "receipt",
                    lambda: ledger.record_receipt(user_id, receipt.verified_at, receipt.to_json()),
                    deadline,
                    batch,
                )
            except EntitlementsError as error:
                return error
            return receipt

        withheld: dict[str, EntitlementsError] = {}
        receipts: dict[str, ErasureReceipt] = {}
        for user_id, outcome in zip(user_ids, self._parallel.map(verified, user_ids), strict=True):
            if isinstance(outcome, EntitlementsError):
                withheld[user_id] = outcome
            elif not outcome.clean:
                for store in outcome.stores_with_traces:
                    telemetry.erasure_traces_found(store)
                logger.error(
                    "erasure verifier found traces: no ACK, left for redelivery",
                    extra={"stores": list(outcome.stores_with_traces)},
                )
                withheld[user_id] = ErasureStepError("verify", "TRACES_FOUND")
            else:
                receipts[user_id] = outcome
        clean = list(receipts)

        def complete(user_id: str) -> LedgerEntry | EntitlementsError:
            try:
                return self._calls.call(
                    "ledger",
                    lambda: ledger.record_pass(
                        user_id, ERASE_PASSES, receipts[user_id].verified_at, removed=removed.get(user_id)
                    ),
                    deadline,
                    batch,
                )
            except EntitlementsError as error:
                return error

        completed: dict[str, LedgerEntry] = {}
        for user_id, done in zip(clean, self._parallel.map(complete, clean), strict=True):
            if isinstance(done, EntitlementsError):
                withheld[user_id] = done
            else:
                completed[user_id] = done
        if not completed:
            return withheld
        finished = list(completed)
        self._erasure.guarded("lake-unmask", lambda: targets.lake.unmask(finished), deadline)
        recorder = self._outcomes
        if recorder is None:
            return withheld
        outcomes = [
            OutcomeEvent(
                # One outcome per completed cycle: a redelivered second pass lands the same id again.
                outcome_id=outcome_id(
                    f"erasure:{ledger.ledger_id(user_id)}:{_cycle(entry)}", OutcomeKind.ERASURE_COMPLETED
                ),
                kind=OutcomeKind.ERASURE_COMPLETED,
                occurred_at=entry.completed_at or receipts[user_id].verified_at,
                user_id=None,  # no personal data: the ledger id links the outcome to the ledger
                array_account_id=None,
                detail=receipts[user_id].to_json(),
            )
            for user_id, entry in completed.items()
        ]

        def record() -> None:
            for outcome in outcomes:
                recorder.add_outcome(outcome)
            recorder.flush()  # durable in the lake before the ACK, not when the worker stops

        self._erasure.guarded("outcome", record, deadline)
        return withheld

    # -- calls --------------------------------------------------------------------------------------

    def _send(self, response: ErasureResponse, deadline: Deadline) -> None:
        self._calls.call(
            "answer", lambda: self._sender.send(response), deadline, self._timings.batch_timeout_seconds
        )
        answer = response.answer if isinstance(response, HoldingsResponse) else response.outcome
        telemetry.erasure_answer(response.type, answer)

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
