"""The one SQS runner: receive, hand the messages to a handler, delete what the handler finished.

The cleanup retry worker, the erasure worker and the relinker each plug their handling into it and keep
only what is theirs (what a message means, what it takes to finish it):

- `run_batches`: each poller receives up to `batch_size` messages (several receives of at most ten, the
  first one long-polling) and hands them to `handle(messages)` at once, which returns the messages it
  finished; those are deleted. A handler that needs the whole batch (the erasure verifies a batch's
  accounts in one scan; the retry worker runs copies of one expiry once) sees it whole.
- `run_each`: `concurrency` threads each handle one message at a time through `handle(message)`, fed by
  one receiver that keeps up to `concurrency` more fetched ahead; finished messages are deleted in
  batches every `ack_interval_seconds`, after `before_delete` (the outcomes' flush) returns.

Nothing is deleted that the handler did not finish: a message left alone becomes visible again after the
queue's visibility timeout and, after its `maxReceiveCount`, moves to the dead-letter queue. A delete that
fails leaves the message to be redelivered, so every handler must be idempotent. AWS failures are read
once (`schema.aws_errors.converted`); log lines hold counts and codes only, never a body.
"""

from __future__ import annotations

__all__ = ["MAX_BATCH", "Message", "ReceivingClient", "SqsRunner"]

import logging
import queue
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from schema.aws_errors import AwsRetryableError, AwsTerminalError, converted
from schema.errors import EntitlementsError

logger = logging.getLogger(__name__)

MAX_BATCH = 10  # SQS's most per receive and per delete batch

Message = Mapping[str, Any]


class ReceivingClient(Protocol):
    """The calls the runner makes (a boto3 `sqs` client has them)."""

    def receive_message(self, **kwargs: Any) -> Any: ...

    def delete_message_batch(self, **kwargs: Any) -> Any: ...


class SqsRunner:
    """Receives from and deletes on one queue. Thread-safe: the pollers and the acknowledger share it.

    `attribute_names` and `message_attribute_names` are asked for on every receive (the erasure reads
    its pass-two token and the receive count; the relinker the receive count)."""

    def __init__(
        self,
        sqs: ReceivingClient,
        queue_url: str,
        *,
        attribute_names: Sequence[str] = (),
        message_attribute_names: Sequence[str] = (),
    ) -> None:
        self._sqs = sqs
        self._queue_url = queue_url
        self._attribute_names = list(attribute_names)
        self._message_attribute_names = list(message_attribute_names)

    @property
    def queue_url(self) -> str:
        return self._queue_url

    # -- the calls ---------------------------------------------------------------------------------

    def receive(self, count: int = MAX_BATCH, wait_seconds: int = 0) -> list[Message]:
        """One receive of up to `count` (1 to 10) messages, long-polling `wait_seconds` (0 to 20).
        Raises `AwsRetryableError` / `AwsTerminalError`."""
        request: dict[str, Any] = {
            "QueueUrl": self._queue_url,
            "MaxNumberOfMessages": max(1, min(MAX_BATCH, count)),
            "WaitTimeSeconds": max(0, min(20, wait_seconds)),
        }
        if self._attribute_names:
            request["AttributeNames"] = self._attribute_names
        if self._message_attribute_names:
            request["MessageAttributeNames"] = self._message_attribute_names
        with converted("SQS ReceiveMessage"):
            response = self._sqs.receive_message(**request)
        return list(response.get("Messages") or [])

    def receive_up_to(self, count: int, wait_seconds: int = 0) -> list[Message]:
        """Up to `count` messages: receives of at most ten, the first long-polling `wait_seconds`, the
        rest not waiting; stops at the first empty receive."""
        messages: list[Message] = []
        wait = wait_seconds
        while len(messages) < count:
            batch = self.receive(min(MAX_BATCH, count - len(messages)), wait)
            if not batch:
                break
            messages.extend(batch)
            wait = 0
        return messages

    def delete(self, messages: Sequence[Message]) -> dict[str, str]:
        """Delete `messages` (one DeleteMessageBatch per ten). Returns the receipt handles that were not
        deleted, each with its code (a failed call fails its whole batch); never raises for AWS: a
        message left behind is redelivered."""
        not_deleted: dict[str, str] = {}
        for start in range(0, len(messages), MAX_BATCH):
            handles = [str(message["ReceiptHandle"]) for message in messages[start : start + MAX_BATCH]]
            entries = [{"Id": str(n), "ReceiptHandle": handle} for n, handle in enumerate(handles)]
            try:
                with converted("SQS DeleteMessageBatch"):
                    response = self._sqs.delete_message_batch(QueueUrl=self._queue_url, Entries=entries)
            except (AwsRetryableError, AwsTerminalError) as error:
                not_deleted.update(dict.fromkeys(handles, error.code))
                continue
            for entry in response.get("Failed") or []:
                number = str(entry.get("Id", ""))
                if number.isdigit() and int(number) < len(handles):
                    not_deleted[handles[int(number)]] = str(entry.get("Code", "error"))
        if not_deleted:
            logger.warning("SQS messages not deleted: left for redelivery", extra={"count": len(not_deleted)})
        return not_deleted

    # -- batches -----------------------------------------------------------------------------------

    def poll_batch(
        self, handle: Callable[[list[Message]], Sequence[Message]], *, batch_size: int, wait_seconds: int
    ) -> int:
        """One receive of up to `batch_size` messages handed to `handle`; deletes what it returns.
        Returns how many were received."""
        messages = self.receive_up_to(batch_size, wait_seconds)
        if messages:
            finished = handle(messages)
            if finished:
                self.delete(finished)
        return len(messages)

    def run_batches(
        self,
        stop: threading.Event,
        handle: Callable[[list[Message]], Sequence[Message]],
        *,
        batch_size: int = MAX_BATCH,
        wait_seconds: int = 20,
        pollers: int = 1,
        error_pause_seconds: float = 1.0,
        idle_pause_seconds: float = 0.0,
    ) -> None:
        """Until `stop` is set (within one long poll): `pollers` loops of `poll_batch`. A failure of a
        receive or of the handler (an `EntitlementsError`) is logged by its code and paused on; the
        messages stay on the queue."""
        if pollers < 1 or batch_size < 1:
            raise ValueError("pollers and batch_size must be at least 1")

        def loop() -> None:
            while not stop.is_set():
                try:
                    received = self.poll_batch(handle, batch_size=batch_size, wait_seconds=wait_seconds)
                except EntitlementsError as error:
                    logger.error("SQS poll failed", extra={"code": getattr(error, "code", "error")})
                    stop.wait(error_pause_seconds)
                    continue
                if received == 0 and idle_pause_seconds > 0:
                    stop.wait(idle_pause_seconds)

        threads = [threading.Thread(target=loop, name=f"sqs-poller-{n}") for n in range(pollers - 1)]
        for thread in threads:
            thread.start()
        loop()
        for thread in threads:
            thread.join()

    # -- one message at a time ---------------------------------------------------------------------

    def run_each(
        self,
        stop: threading.Event,
        handle: Callable[[Message], bool],
        *,
        concurrency: int,
        wait_seconds: int = 20,
        drain: bool = False,
        before_delete: Callable[[int], bool] | None = None,
        on_deleted: Callable[[int], None] | None = None,
        ack_interval_seconds: float = 0.5,
        error_pause_seconds: float = 1.0,
    ) -> None:
        """Until `stop` is set, or with `drain` until a receive finds nothing while no message is being
        handled: `concurrency` threads run `handle(message)` (True: finished, to delete). Finished
        messages are deleted every `ack_interval_seconds` and once at the end, each time after
        `before_delete(count)` returned True (called every round, `count` the messages about to be
        deleted; False: the outcomes did not land, the messages stay and are redelivered);
        `on_deleted(count)` then hears how many were deleted. Messages fetched ahead and not started
        when the run stops become visible again after the queue's visibility timeout."""
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        acks = _Acknowledger(self, before_delete, on_deleted)
        ahead: queue.Queue[Message | None] = queue.Queue(maxsize=concurrency)
        lock = threading.Lock()
        running = [0]

        def work() -> None:
            while (message := ahead.get()) is not None:
                try:
                    if handle(message):
                        acks.finished.put(message)
                finally:
                    with lock:
                        running[0] -= 1

        ended = threading.Event()
        acknowledger = threading.Thread(
            target=acks.every, args=(ended, ack_interval_seconds), name="sqs-acknowledger", daemon=True
        )
        acknowledger.start()
        workers = [
            threading.Thread(target=work, name=f"sqs-worker-{n}", daemon=True) for n in range(concurrency)
        ]
        for thread in workers:
            thread.start()
        while not stop.is_set():
            with lock:
                busy = running[0] > 0
            try:
                messages = self.receive(MAX_BATCH, wait_seconds=1 if drain or busy else wait_seconds)
            except (AwsRetryableError, AwsTerminalError) as error:
                logger.warning("SQS receive failed", extra={"code": error.code})
                stop.wait(error_pause_seconds)
                continue
            if not messages and drain and not busy:
                break
            for message in messages:
                with lock:
                    running[0] += 1  # counted from the moment it is fetched until it is handled
                ahead.put(message)
        for _ in workers:
            ahead.put(None)
        for thread in workers:
            thread.join()
        ended.set()
        acknowledger.join()
        acks.acknowledge()  # whatever is left


class _Acknowledger:
    """`run_each`'s finished messages, deleted in batches once `before_delete` says they may be."""

    def __init__(
        self,
        runner: SqsRunner,
        before_delete: Callable[[int], bool] | None,
        on_deleted: Callable[[int], None] | None,
    ) -> None:
        self.finished: queue.Queue[Message] = queue.Queue()
        self._runner = runner
        self._before_delete = before_delete
        self._on_deleted = on_deleted

    def every(self, ended: threading.Event, seconds: float) -> None:
        while not ended.wait(seconds):
            self.acknowledge()

    def acknowledge(self) -> None:
        done: list[Message] = []
        while True:
            try:
                done.append(self.finished.get_nowait())
            except queue.Empty:
                break
        if self._before_delete is not None and not self._before_delete(len(done)):
            return  # not landed: the messages stay on the queue and are redelivered, then handled again
        if done:
            not_deleted = self._runner.delete(done)
            if self._on_deleted is not None:
                self._on_deleted(len(done) - len(not_deleted))
