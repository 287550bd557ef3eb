"""The answers a store sends (step 4): NOT_APPLICABLE at once for the pairs it does not implement (and
the batch's `ErasureNotApplicable` datum), HOLDS_DATA / HOLDS_NONE / CANNOT_ANSWER for CHECK and CLASSIFY,
and the ACK (DONE, echoing sendNo) for a finished erasure, always with `subscriber` from the settings,
never the message."""

from __future__ import annotations

__all__ = ["NOT_APPLICABLE_METRIC", "Answers"]

import logging

import telemetry
from processors.erasure._batch import Batch, BatchTools, Job, failed
from processors.erasure._bounded import Deadline
from processors.erasure._capabilities import not_applicable_answer
from processors.erasure._clients import CloudWatchClient
from processors.erasure._errors import converted
from schema.erasure import (
    AckResponse,
    CheckRequest,
    ClassifyRequest,
    EraseRequest,
    ErasureResponse,
    ErasureResponseSender,
    HoldingsResponse,
)
from schema.errors import EntitlementsError

logger = logging.getLogger(__name__)

NOT_APPLICABLE_METRIC = "ErasureNotApplicable"


class Answers:
    def __init__(
        self,
        tools: BatchTools,
        sender: ErasureResponseSender,
        *,
        subscriber: str,
        cloudwatch: CloudWatchClient,
        namespace: str,
    ) -> None:
        self._tools = tools
        self._sender = sender
        self._subscriber = subscriber
        self._cloudwatch = cloudwatch
        self._namespace = namespace

    def not_applicable(self, jobs: list[Job], batch: Batch) -> None:
        answered = 0
        for job in jobs:
            try:
                self._send(not_applicable_answer(job.request, self._subscriber), batch.deadline)
            except EntitlementsError as error:
                failed(job, error, batch.report)
                continue
            answered += 1
            batch.consumed.append((job, "not_applicable"))
        if answered:
            telemetry.erasure_not_applicable(answered)
            self._count_not_applicable(answered, batch)

    def holdings(self, job: Job, batch: Batch) -> None:
        request = job.request
        assert isinstance(request, CheckRequest | ClassifyRequest)
        try:
            answer = self._tools.erasure.holdings(request.key, batch.deadline)
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
            failed(job, error, batch.report)
            return
        batch.consumed.append((job, "holdings"))

    def acknowledge(self, job: Job, deadline: Deadline) -> EntitlementsError | None:
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

    def _count_not_applicable(self, count: int, batch: Batch) -> None:
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
            self._tools.calls.call("metric", put, batch.deadline, self._tools.limit)
        except EntitlementsError as error:
            batch.report.metric_failures += 1
            logger.error(
                "ErasureNotApplicable metric not sent",
                extra={"code": getattr(error, "code", "error"), "count": count},
            )

    def _send(self, response: ErasureResponse, deadline: Deadline) -> None:
        self._tools.calls.call("answer", lambda: self._sender.send(response), deadline, self._tools.limit)
        answer = response.answer if isinstance(response, HoldingsResponse) else response.outcome
        telemetry.erasure_answer(response.type, answer)
