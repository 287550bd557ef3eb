"""ERASE by ACCOUNT in two passes, the second the store's own decision.

The first pass records pass one in the ledger and re-enqueues the message's own body on the store's
queue with `DelaySeconds` = the pass-two delay and the message attribute `ErasurePassTwoToken` = the
ledger's `pass_two_token(body)` (an HMAC under a key derived from the ledger key: the contract forbids
extra body fields, and no publisher can make the token); the original is deleted with the rest of the
batch. A message is a second pass only when its token verifies for its body and the ledger shows pass one
finished (`ErasureLedger.is_pass_two`); anything else is a first pass. The second pass repeats the whole
erasure (catching what landed in between), is verified and completed (`_completion`), and only then ACKed.
"""

from __future__ import annotations

__all__ = ["ErasePasses"]

import logging
from collections.abc import Mapping
from functools import partial
from typing import Any

from processors.erasure._answers import Answers
from processors.erasure._batch import Batch, BatchTools, Job, account, failed
from processors.erasure._clients import ErasureSqsClient
from processors.erasure._completion import Completion
from processors.erasure._errors import ErasureStepError, converted
from processors.erasure._intake import PASS_TWO_TOKEN_ATTRIBUTE
from processors.erasure._ledger import ERASE_PASSES
from schema.errors import EntitlementsError

logger = logging.getLogger(__name__)


class ErasePasses:
    def __init__(
        self,
        tools: BatchTools,
        *,
        sqs: ErasureSqsClient,
        queue_url: str,
        completion: Completion,
        answers: Answers,
    ) -> None:
        self._tools = tools
        self._sqs = sqs
        self._queue_url = queue_url
        self._completion = completion
        self._answers = answers

    def erase(self, jobs: list[Job], batch: Batch) -> None:
        tools = self._tools
        jobs = self._passes_decided(jobs, batch)
        if not jobs:
            return
        user_ids = [account(job) for job in jobs]
        results, removed = tools.erasure.erase_counted(user_ids, batch.deadline)
        firsts: list[Job] = []
        finals: list[Job] = []
        for job in jobs:
            error = results.get(account(job))
            if error is not None:
                failed(job, error, batch.report)
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
                withheld = self._completion.complete(finals, batch, removed)
            except EntitlementsError as error:
                for job in finals:
                    failed(job, error, batch.report)
                return
            for job in finals:
                if account(job) in withheld:
                    failed(job, withheld[account(job)], batch.report)
            finals = [job for job in finals if account(job) not in withheld]
            acks = tools.parallel.map(lambda job: self._answers.acknowledge(job, batch.deadline), finals)
            for job, failure in zip(finals, acks, strict=True):
                if failure is None:
                    batch.consumed.append((job, "done"))
                else:
                    failed(job, failure, batch.report)

    def _passes_decided(self, jobs: list[Job], batch: Batch) -> list[Job]:
        """Which pass each ERASE is, from the store's own record: a second pass only when the message's
        token verifies for its body and the ledger shows pass one finished. An account with a first pass
        in this batch takes all its messages as first passes (a new cycle opens for it). Before the
        erasure runs, each first pass's ledger entry is made, opening a new cycle when the account's
        last erasure completed. Returns the jobs whose ledger could be read and written."""
        tools = self._tools
        ledger = tools.erasure.targets.ledger
        kept: list[Job] = []
        for job in jobs:
            if job.token is None:
                job.pass_number = 1
                kept.append(job)
                continue
            user_id, token = account(job), job.token
            try:
                signed = tools.calls.call(
                    "ledger",
                    partial(ledger.is_pass_two, user_id, job.body, token),
                    batch.deadline,
                    tools.limit,
                )
            except EntitlementsError as error:
                failed(job, error, batch.report)
                continue
            job.pass_number = ERASE_PASSES if signed else 1
            if not signed:
                logger.warning("erasure pass-two token not the store's: taken as a first pass")
            kept.append(job)
        restarting = {account(job) for job in kept if job.pass_number == 1}
        for job in kept:
            if account(job) in restarting:
                job.pass_number = 1
        now = tools.clock.now()

        def start(user_id: str) -> EntitlementsError | None:
            try:
                tools.calls.call(
                    "ledger",
                    lambda: ledger.record_started(user_id, now, new_cycle=True),
                    batch.deadline,
                    tools.limit,
                )
            except EntitlementsError as error:
                return error
            return None

        users = sorted(restarting)
        failures = dict(zip(users, tools.parallel.map(start, users), strict=True))
        ready: list[Job] = []
        for job in kept:
            failure = failures.get(account(job))
            if failure is None:
                ready.append(job)
            else:
                failed(job, failure, batch.report)
        return ready

    def _pass_one_recorded(
        self, jobs: list[Job], batch: Batch, removed: Mapping[str, Mapping[str, int]]
    ) -> list[Job]:
        """Record each first pass in the ledger (what a second pass is recognised by) before its delayed
        copy is sent; a job whose record fails is left for redelivery."""
        tools = self._tools
        ledger = tools.erasure.targets.ledger
        now = tools.clock.now()

        def record(job: Job) -> EntitlementsError | None:
            user_id = account(job)
            try:
                tools.calls.call(
                    "ledger",
                    lambda: ledger.record_pass(user_id, 1, now, removed=removed.get(user_id)),
                    batch.deadline,
                    tools.limit,
                )
            except EntitlementsError as error:
                return error
            return None

        recorded: list[Job] = []
        for job, failure in zip(jobs, tools.parallel.map(record, jobs), strict=True):
            if failure is None:
                recorded.append(job)
            else:
                failed(job, failure, batch.report)
        return recorded

    def _enqueue_pass_two(self, jobs: list[Job], batch: Batch) -> None:
        """Each first pass's own body back on the store's queue, delayed, with the store's pass-two token
        (one SendMessageBatch for the batch); the originals are deleted with the rest of the batch."""
        tools = self._tools
        ledger = tools.erasure.targets.ledger
        entries = [
            {
                "Id": str(number),
                "MessageBody": job.body,
                "DelaySeconds": tools.timings.pass_two_delay_seconds,
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
            response = tools.calls.call("pass-two-enqueue", send, batch.deadline, tools.limit)
        except EntitlementsError as error:
            for job in jobs:
                failed(job, error, batch.report)
            return
        codes = {
            str(entry.get("Id")): str(entry.get("Code", "error")) for entry in response.get("Failed") or []
        }
        for number, job in enumerate(jobs):
            code = codes.get(str(number))
            if code is None:
                batch.consumed.append((job, "pass_one"))
            else:
                failed(job, ErasureStepError("pass-two-enqueue", code), batch.report)
