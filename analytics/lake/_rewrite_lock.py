"""One rewrite of a lake at a time.

Purges (an erasure), compactions and snapshots each read some of the lake's files and then write files
that replace or fold them. Two at once could put back what the other took out: a compaction that read a
change file before a purge rewrote it would write the erased user's rows into its merged file, and a
snapshot into its state. So each runs holding the lake's rewrite lock (`rewrites_lake`):

- in the process, a lock per lake (reentrant: a rewrite may call another on the same lake);
- for a local lake, also an advisory file lock on ``<root>/.rewrite.lock`` (filelock: ``flock``), which
  serialises them across the processes of the machine (the consumer, the erasure worker, the CLI).

Landing takes no part: it only adds new files, and the landing filter keeps an erased user's events out.
An ``s3://`` lake has no lock across processes (S3 offers none that pyarrow uses): run its purges,
compactions and snapshots from one process.
"""

from __future__ import annotations

__all__ = ["LOCK_FILE_NAME", "rewrite_lock", "rewrites_lake"]

import functools
import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Concatenate, ParamSpec, TypeVar

from filelock import FileLock

from analytics.lake._filesystem import Lake

logger = logging.getLogger(__name__)

LOCK_FILE_NAME = ".rewrite.lock"
_P = ParamSpec("_P")
_R = TypeVar("_R")
_registry_lock = threading.Lock()
_process_locks: dict[str, threading.RLock] = {}


def _process_lock(lake: Lake) -> threading.RLock:
    with _registry_lock:
        return _process_locks.setdefault(lake.uri, threading.RLock())


@contextmanager
def rewrite_lock(lake: Lake) -> Iterator[None]:
    """Hold `lake`'s rewrite lock (blocking until it is free)."""
    in_process = _process_lock(lake)
    if not in_process.acquire(blocking=False):
        logger.info("waiting for another rewrite of the lake to finish")
        in_process.acquire()
    try:
        if not lake.is_local:
            yield
            return
        # One FileLock object per path, its count shared by the threads: the process lock above lets one
        # thread in at a time, and a nested rewrite in that thread re-enters without a second flock.
        across_processes = FileLock(lake.path(LOCK_FILE_NAME), is_singleton=True, thread_local=False)
        with across_processes:
            yield
    finally:
        in_process.release()


def rewrites_lake(fn: Callable[Concatenate[Lake, _P], _R]) -> Callable[Concatenate[Lake, _P], _R]:
    """Run `fn(lake, ...)` holding `lake`'s rewrite lock."""

    @functools.wraps(fn)
    def holding_the_lock(lake: Lake, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        with rewrite_lock(lake):
            return fn(lake, *args, **kwargs)

    return holding_the_lock
