"""The worker writer: one process beside each KCL worker (JVM) that commits its children's flushes, so
a table's log takes one commit per worker per interval instead of one per shard
(docs/architecture.md, "Commits at scale").

Each child's landing handler (`LakeHandler` with `WorkerWriterClient` as its commits) sends a flush, its
pending parts as Arrow IPC, over a local socket and waits for the answer. The writer lands the flushes
that arrive together (every connected child's, or whatever came within `gather_seconds` of the first;
a round at most every `round_seconds`) in one commit per table through `TableCommits`, the same
planned, exactly-once commit a child makes on its own, and answers each flush with that commit's
report. So a child's checkpoint still follows only a commit that holds its rows, and a failed commit
leaves every flush of it buffered in its child, which retries. A writer killed mid-commit loses
nothing: its children's flushes fail and are retried on the restarted writer, planned against the
table (rows already there are dropped).

Transport: `multiprocessing.connection` on an abstract Unix socket (Linux), authenticated by a key the
writer draws at start and writes with its address to an owner-only file that its children read
(`address_file`); nothing listens on a network address. Each message is one frame: a JSON header, then
one Arrow IPC stream per part.
"""

from __future__ import annotations

__all__ = ["WorkerWriter", "WorkerWriterClient"]

import contextlib
import hashlib
import json
import logging
import os
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date
from multiprocessing import AuthenticationError
from multiprocessing.connection import Client, Connection, Listener
from pathlib import Path

import pyarrow as pa
from tenacity import Retrying, retry_if_exception_type, stop_after_delay, wait_fixed

from analytics.lake._commit_report import CommitReport, Commits, Pending
from analytics.lake._filesystem import Lake
from analytics.lake._rows import PendingFile
from analytics.lake._schema import CHANGES, OUTCOMES, default_allow_list
from schema import write_private_file

logger = logging.getLogger(__name__)

# The tables in the order a flush commits them (outcomes after the changes they may follow).
_ORDER = (CHANGES, OUTCOMES)


def _socket_name(address_file: Path) -> str:
    # Abstract namespace: no path length limit, nothing left on disk by a killed writer.
    digest = hashlib.sha256(str(address_file.resolve()).encode()).hexdigest()[:24]
    return f"\0entitlements-lake-writer-{digest}"


def _send_flush(connection: Connection, pending: Pending) -> None:
    header = [
        {"dataset": dataset, "days": [part.day.isoformat() for part in parts]} for dataset, parts in pending
    ]
    connection.send_bytes(json.dumps(header).encode())
    for _, parts in pending:
        for part in parts:
            sink = pa.BufferOutputStream()
            with pa.ipc.new_stream(sink, part.table.schema) as stream:
                stream.write_table(part.table)
            connection.send_bytes(sink.getvalue())


def _receive_flush(connection: Connection) -> list[tuple[str, list[PendingFile]]]:
    header = json.loads(connection.recv_bytes())
    flush: list[tuple[str, list[PendingFile]]] = []
    for entry in header:
        dataset = entry["dataset"]
        if dataset not in _ORDER:
            raise ValueError("a flush names an unknown table")
        parts = []
        for day in entry["days"]:
            table = pa.ipc.open_stream(pa.py_buffer(connection.recv_bytes())).read_all()
            parts.append(PendingFile(dataset, date.fromisoformat(day), table))
        flush.append((dataset, parts))
    return flush


@dataclass(eq=False)
class _Flush:
    pending: list[tuple[str, list[PendingFile]]]
    arrived: float
    answered: threading.Event = field(default_factory=threading.Event)
    report: CommitReport | None = None

    def shards(self) -> set[tuple[str | None, str | None]]:
        """The (stream, shard) pairs whose rows the flush holds; (None, None) for outcomes of no source."""
        found: set[tuple[str | None, str | None]] = set()
        for dataset, parts in self.pending:
            stream, shard = (
                ("stream_arn", "shard_id") if dataset == CHANGES else ("source_stream_arn", "source_shard_id")
            )
            for part in parts:
                pairs = part.table.select([stream, shard]).group_by([stream, shard]).aggregate([])
                found.update(zip(pairs[stream].to_pylist(), pairs[shard].to_pylist(), strict=True))
        return found


def _rounds(batch: list[_Flush]) -> list[list[_Flush]]:
    """The batch in commits whose flushes share no shard. A commit is planned against the table, not
    against itself: two flushes of one shard in one commit (a zombie child beside the child that took
    its lease, each flushing the same records) would both land, so the second goes in a later commit,
    planned against the first's. Almost always one round."""
    rounds: list[tuple[list[_Flush], set[tuple[str | None, str | None]]]] = []
    for flush in batch:
        shards = flush.shards()
        for flushes, taken in rounds:
            if taken.isdisjoint(shards):
                flushes.append(flush)
                taken.update(shards)
                break
        else:
            rounds.append(([flush], shards))
    return [flushes for flushes, _ in rounds]


class WorkerWriter:
    """Serves the flushes of one worker's children until `stop`: see the module's docstring.

    A round begins at most every `round_seconds` (the consumer's commit interval, as composed): a
    child's next flush is due an interval after its answer, so the children answered by one round
    come back together for the next, and children that started apart (leases taken at other times)
    join one cohort after a round, one commit per table per interval. The gathered flushes are
    committed to `lake` (or through `commits`, for tests); `monotonic` is the clock for the gathering
    (injectable for tests)."""

    def __init__(
        self,
        lake: Lake,
        address_file: Path,
        *,
        gather_seconds: float = 1.0,
        round_seconds: float = 0.0,
        commits: Commits | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        if commits is None:
            # Here, not at the top: the children import this module for `WorkerWriterClient` and
            # must not load the committer's planner (analytics.lake._commit_report says why).
            from analytics.lake._commits import TableCommits  # noqa: PLC0415

            commits = TableCommits(lake, default_allow_list())
        self._commits = commits
        self._address_file = address_file
        self._gather = gather_seconds
        self._round = round_seconds
        self._last_round = float("-inf")
        self._monotonic = monotonic
        self._ready = threading.Condition()
        self._queue: list[_Flush] = []
        self._clients = 0
        self._connections: set[Connection] = set()
        self._closed = False
        self.commit_rounds = 0  # rounds that committed something (one commit per table touched)
        self.flushes = 0

    def serve(self, stop: threading.Event, *, parent: int | None = None) -> None:
        """Listen, answer flushes, and return once `stop` is set (or the process `parent` is gone: a
        writer outlives no worker). The flushes queued by then are committed and answered first."""
        key = secrets.token_bytes(32)
        name = _socket_name(self._address_file)
        listener = Listener(name, family="AF_UNIX", authkey=key)
        self._closed = False
        try:
            write_private_file(self._address_file, json.dumps({"address": name, "key": key.hex()}).encode())
            threading.Thread(target=self._accept, args=(listener,), name="writer-accept", daemon=True).start()
            logger.info("lake worker writer listening")
            while not (stop.is_set() or (parent is not None and os.getppid() != parent)):
                batch = self._gathered(stop, timeout=1.0)
                if batch:
                    self._commit(batch)
            with self._ready:
                batch, self._queue = self._queue, []
            if batch:
                self._commit(batch)
        finally:
            self._address_file.unlink(missing_ok=True)
            self._close()
            # A thread blocked in accept() keeps the socket (and its address) alive after close():
            # one last connection of our own wakes it, and it sees the writer closed.
            with contextlib.suppress(OSError):
                Client(name, family="AF_UNIX", authkey=key).close()
            listener.close()
            logger.info("lake worker writer stopped", extra={"rounds": self.commit_rounds})

    def _close(self) -> None:
        """Answer what arrived too late as failed (its children retry) and close every connection, so
        no child waits on a writer that stopped."""
        with self._ready:
            self._closed = True
            late, self._queue = self._queue, []
            connections = list(self._connections)
        self._answer(late, CommitReport(failed=CHANGES, error="writer stopping"))
        for connection in connections:
            connection.close()

    def _accept(self, listener: Listener) -> None:
        while True:
            try:
                connection = listener.accept()
            except AuthenticationError:
                logger.warning("lake worker writer refused a connection: wrong key")
                continue
            except OSError:
                return  # the listener was closed
            if self._closed:
                connection.close()
                return
            threading.Thread(
                target=self._serve_child, args=(connection,), name="writer-child", daemon=True
            ).start()

    def _serve_child(self, connection: Connection) -> None:
        with self._ready:
            if self._closed:
                connection.close()
                return
            self._clients += 1
            self._connections.add(connection)
        try:
            while True:
                try:
                    pending = _receive_flush(connection)
                except (EOFError, OSError):
                    return  # the child closed its end (it ended, or gave up on an answer)
                except (ValueError, KeyError, TypeError, pa.ArrowException) as error:
                    logger.error(
                        "lake worker writer got a malformed flush", extra={"error": type(error).__name__}
                    )
                    return
                flush = _Flush(pending, self._monotonic())
                with self._ready:
                    if self._closed:
                        return
                    self._queue.append(flush)
                    self._ready.notify_all()
                flush.answered.wait()
                assert flush.report is not None
                try:
                    connection.send_bytes(flush.report.to_json())
                except OSError:
                    return
        finally:
            connection.close()
            with self._ready:
                self._clients -= 1
                self._connections.discard(connection)
                self._ready.notify_all()

    def _gathered(self, stop: threading.Event, *, timeout: float) -> list[_Flush]:
        """The flushes of the next round: once one is queued and `round_seconds` passed since the last
        round began, wait until every connected child has sent one or `gather_seconds` passed, then
        take them all."""
        with self._ready:
            if not self._queue:
                self._ready.wait(timeout)
                if not self._queue:
                    return []
            not_before = self._last_round + self._round
            while not stop.is_set():
                now = self._monotonic()
                closes = max(self._queue[0].arrived, not_before) + self._gather
                if now >= not_before and (len(self._queue) >= self._clients or now >= closes):
                    break
                self._ready.wait((not_before if now < not_before else closes) - now)
            self._last_round = self._monotonic()
            batch, self._queue = self._queue, []
            return batch

    def _commit(self, batch: list[_Flush]) -> None:
        for round_ in _rounds(batch):
            self._commit_round(round_)

    def _commit_round(self, batch: list[_Flush]) -> None:
        report = self._commit_together(batch)
        if report.failed is not None and len(batch) > 1:
            # One child's rows must not hold back the others': each flush is tried on its own (what
            # committed of the round stays committed; a retry plans against the table).
            for flush in batch:
                self._answer([flush], self._commit_together([flush]))
            return
        self._answer(batch, report)

    def _commit_together(self, batch: list[_Flush]) -> CommitReport:
        merged: dict[str, list[PendingFile]] = {}
        for flush in batch:
            for dataset, parts in flush.pending:
                merged.setdefault(dataset, []).extend(parts)
        pending = [(dataset, merged[dataset]) for dataset in _ORDER if dataset in merged]
        try:
            report = self._commits.commit(pending)
        except Exception as error:  # answered as a failure, so no child waits for ever
            logger.error(
                "lake worker writer: unexpected commit failure", extra={"error": type(error).__name__}
            )
            return CommitReport(failed=pending[0][0] if pending else None, error=type(error).__name__)
        if report.commits:
            self.commit_rounds += 1
        logger.debug("lake worker writer round", extra={"flushes": len(batch), "commits": report.commits})
        return report

    def _answer(self, batch: list[_Flush], report: CommitReport) -> None:
        self.flushes += len(batch)
        for flush in batch:
            flush.report = report
            flush.answered.set()


class _WriterUnreachable(Exception):
    """No writer answers at the address file's address (the cause says why); retried for a while."""


class WorkerWriterClient:
    """A child's commits: each flush sent to its worker's writer, answered once the commit holding it
    returned. A writer that cannot be reached (gone, restarting, its address file not yet rewritten) is
    tried again, reading the address file afresh each time (a restarted writer has a new key), for up
    to `reconnect_seconds`: the daemon restarts a dead writer within seconds, and a flush sent again is
    planned against the table, so rows a dead writer committed land nothing twice. Once that passes, or
    when no answer comes within `reply_timeout` of a flush sent, the commit fails (the handler keeps its
    buffer and raises a retryable error)."""

    def __init__(
        self, address_file: Path, *, reply_timeout: float = 60.0, reconnect_seconds: float = 30.0
    ) -> None:
        self._address_file = address_file
        self._reply_timeout = reply_timeout
        self._reconnect = Retrying(
            stop=stop_after_delay(reconnect_seconds),
            wait=wait_fixed(0.2),
            retry=retry_if_exception_type(_WriterUnreachable),
            reraise=True,
        )
        self._connection: Connection | None = None

    def commit(self, pending: Pending) -> CommitReport:
        if not pending:
            return CommitReport()
        try:
            return self._reconnect(self._exchange, pending)
        except (_WriterUnreachable, TimeoutError, ValueError, KeyError) as error:
            cause = error.__cause__ if isinstance(error, _WriterUnreachable) else error
            return CommitReport(failed=pending[0][0], error=f"worker writer {type(cause).__name__}")

    def _exchange(self, pending: Pending) -> CommitReport:
        try:
            connection = self._connect()
            _send_flush(connection, pending)
            answer = connection.recv_bytes() if connection.poll(self._reply_timeout) else None
        except (OSError, EOFError, AuthenticationError) as error:
            # A missing address file, a refused connection, a key from before a restart, a writer that
            # died with the flush (EOF): all mean "no writer right now".
            self.close()
            raise _WriterUnreachable from error
        except (ValueError, KeyError):
            self.close()  # an address file that is not one
            raise
        if answer is None:
            # The writer is there but slow: sending again would only queue the flush twice.
            self.close()
            raise TimeoutError("no answer from the lake worker writer")
        try:
            return CommitReport.from_json(answer)
        except (ValueError, KeyError):
            self.close()
            raise

    def connect(self) -> None:
        """Connect now rather than at the first flush (the writer then counts this child among those
        whose flushes it gathers)."""
        self._connect()

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    def _connect(self) -> Connection:
        if self._connection is None:
            entry = json.loads(self._address_file.read_bytes())
            self._connection = Client(entry["address"], family="AF_UNIX", authkey=bytes.fromhex(entry["key"]))
        return self._connection
