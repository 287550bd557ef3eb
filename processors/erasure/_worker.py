"""The erasure worker: a long-poll loop on the store's own SQS queue, which the erasure SNS topic feeds
with raw message delivery (so each body is the published message) and no filter policy.

Each received batch follows the contract's steps, for every message in turn, each step in its own room:

1. **Validate** (`_intake`): an invalid body is refused and not deleted; SQS redelivers it and, after
   maxReceiveCount receives, moves it to the dead-letter queue. Nothing is answered for it.
2. **Expiry**, by the store's own clock: an expired valid message is deleted with no answer at all.
3. **Dispatch** on (type, keyKind) through the one capability table (`CAPABILITIES`). A pair this store
   does not implement is answered at once with NOT_APPLICABLE and counted in the CloudWatch metric
   `ErasureNotApplicable` (namespace `settings.metrics_namespace`); CHECK and CLASSIFY by ACCOUNT are
   answered HOLDS_DATA, HOLDS_NONE or CANNOT_ANSWER (`_answers`); ERASE by ACCOUNT runs a pass of the
   erasure (`_passes`: two passes, the second the store's own decision, by a token only the store can
   make).
4. **Answer** through `ErasureResponseSender`, with `subscriber` from the settings, never the message.

The second pass repeats the whole erasure and verifies it (`_completion`: every store scanned once for
the batch's second passes, a receipt per erasure kept in the ledger); only a clean receipt completes the
ledger entry, unmasks the account in the lake, lands an `erasure.completed` outcome carrying the receipt
(flushed) and sends the ACK (DONE, echoing sendNo). A receipt with a trace sends nothing: the message is
left for redelivery and counted in `entitlements_erasure_traces_found`. A batch whose verification cannot
finish within its deadline is left for redelivery, unverified and unanswered, and counted in
`WorkerStats.unverified` (and logged). Any message that fails is left for redelivery; every step is
idempotent. A state file that cannot be read or written (a full disk, a read-only state directory) fails
its step like any other, as a retryable `ErasureStateError` converted where the files are touched, so
the worker keeps running.

Time: one deadline of `handler_timeout_seconds` per received batch bounds every message's handling; each
call is bounded by `batch_timeout_seconds`; the queue's visibility timeout is exactly 6 x the handler
timeout (checked by `verify_queue`). Logs hold counts and codes only: never a body, a key, a requestId,
an address or a user id.
"""

from __future__ import annotations

__all__ = ["ErasureWorker"]

import json
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import fields
from functools import partial
from typing import Any

from adapters.sqs_runner import Message, SqsRunner
from config import ErasureSettings
from processors.erasure._answers import Answers
from processors.erasure._batch import Batch, BatchReport, BatchTools, Job, WorkerStats, failed
from processors.erasure._bounded import BoundedCalls, Deadline, Parallel
from processors.erasure._capabilities import Handling, handling_for
from processors.erasure._clients import CloudWatchClient, ErasureSqsClient
from processors.erasure._completion import Completion
from processors.erasure._config import ErasureTimings, checked_timings
from processors.erasure._errors import ErasureConfigError, ErasureStepError, converted
from processors.erasure._intake import MAX_MESSAGES, PASS_TWO_TOKEN_ATTRIBUTE, validated
from processors.erasure._passes import ErasePasses
from processors.erasure._procedure import AccountErasure, ErasureTargets
from processors.erasure._table import UserTable
from schema.clock import Clock
from schema.erasure import ErasureResponseSender, is_expired
from schema.errors import EntitlementsError
from schema.outcomes import FlushingSink

logger = logging.getLogger(__name__)

_ERROR_PAUSE_SECONDS = 1.0


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
        outcomes: FlushingSink | None = None,
        concurrency: int = 8,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._timings: ErasureTimings = checked_timings(settings)
        if not settings.subscriber:
            raise ErasureConfigError("the erasure subscriber name must not be empty")
        self._subscriber = settings.subscriber
        self._sqs = sqs
        self._queue_url = queue_url
        self._runner = SqsRunner(
            sqs,
            queue_url,
            attribute_names=["ApproximateReceiveCount"],
            message_attribute_names=[PASS_TWO_TOKEN_ATTRIBUTE],
        )
        self._clock = clock
        self._outcomes = outcomes
        self._monotonic = monotonic
        if concurrency < 1:
            raise ErasureConfigError("concurrency must be at least 1")
        # Each parallel task waits on at most one bounded call at a time; the margin absorbs calls
        # abandoned after their budget.
        self._calls = BoundedCalls(max_workers=2 * concurrency + 4)
        self._parallel = Parallel(concurrency)
        erasure = AccountErasure(
            targets,
            self._calls,
            batch_timeout=self._timings.batch_timeout_seconds,
            clock=clock,
            parallel=self._parallel,
        )
        tools = BatchTools(self._calls, self._parallel, self._timings, clock, erasure)
        self._answers = Answers(
            tools,
            ErasureResponseSender(sqs, responses_queue_url),
            subscriber=settings.subscriber,
            cloudwatch=cloudwatch,
            namespace=settings.metrics_namespace,
        )
        table = UserTable(
            targets.dynamodb, targets.table_name, self._calls, self._timings.batch_timeout_seconds
        )
        self._passes = ErasePasses(
            tools,
            sqs=sqs,
            queue_url=queue_url,
            completion=Completion(tools, table, outcomes),
            answers=self._answers,
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
        self._runner.run_batches(
            stop,
            self._handled,
            batch_size=MAX_MESSAGES,
            wait_seconds=wait_seconds,
            pollers=pollers,
            error_pause_seconds=_ERROR_PAUSE_SECONDS,
        )
        logger.info("erasure worker stopped", extra=self._stats_extra())
        return self.stats

    def _handled(self, messages: list[Message]) -> list[Message]:
        """The runner's batch handler: the worker deletes what it consumed itself, within the batch's
        deadline and counting each message under what consumed it, so nothing is left to the runner."""
        self.handle(messages)
        return []

    def poll_once(self, wait_seconds: int = 20) -> BatchReport:
        """One long poll of at most `wait_seconds` (0 to 20), and the handling of what it received."""
        return self.handle(self._runner.receive(MAX_MESSAGES, wait_seconds))

    def handle(self, messages: Sequence[Mapping[str, Any]]) -> BatchReport:
        """Handle one received batch under one handler deadline."""
        report = BatchReport(received=len(messages))
        if not messages:
            return report
        batch = Batch(report, Deadline(self._timings.handler_timeout_seconds, monotonic=self._monotonic))
        now = self._clock.now()
        not_applicable: list[Job] = []
        holdings: list[Job] = []
        erasures: list[Job] = []
        for message in messages:
            job = validated(message, report)
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
        self._answers.not_applicable(not_applicable, batch)
        for job in holdings:
            self._answers.holdings(job, batch)
        if erasures:
            self._passes.erase(erasures, batch)
        self._delete_consumed(batch)
        with self._stats_lock:
            self.stats.add(report)
        logger.info("erasure batch", extra={f.name: getattr(report, f.name) for f in fields(report)})
        return report

    def _delete_consumed(self, batch: Batch) -> None:
        """Delete every message the batch consumed (one DeleteMessageBatch per 10), counting each under
        what consumed it; a message whose delete fails is redelivered, and answered again, harmlessly."""
        consumed = batch.consumed
        for start in range(0, len(consumed), MAX_MESSAGES):
            chunk = consumed[start : start + MAX_MESSAGES]
            messages: list[Message] = [{"ReceiptHandle": job.receipt} for job, _ in chunk]
            try:
                not_deleted = self._calls.call(
                    "delete-message",
                    partial(self._runner.delete, messages),
                    batch.deadline,
                    self._timings.batch_timeout_seconds,
                )
            except EntitlementsError as error:  # the batch's time ran out: every delete unconfirmed
                for job, _ in chunk:
                    failed(job, error, batch.report)
                continue
            for job, counter in chunk:
                code = not_deleted.get(job.receipt)
                if code is not None:
                    failed(job, ErasureStepError("delete-message", code), batch.report)
                    continue
                setattr(batch.report, counter, getattr(batch.report, counter) + 1)
                if counter == "expired":
                    logger.info("expired erasure request consumed", extra={"type": job.request.type})

    def _stats_extra(self) -> dict[str, int]:
        return {f.name: getattr(self.stats, f.name) for f in fields(self.stats)}
