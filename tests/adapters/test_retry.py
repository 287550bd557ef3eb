"""adapters/retry.py: bounded attempts, jittered capped backoff, Retry-After and the caller's deadline."""

from __future__ import annotations

import pytest

from adapters.errors import TransientCall
from adapters.retry import RetryPolicy
from schema.errors import TerminalError


class Clock:
    def __init__(self) -> None:
        self.now = 100.0
        self.sleeps: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def _failing(policy: RetryPolicy, error: Exception, *, deadline: float | None = None) -> int:
    calls = 0
    with pytest.raises(type(error)):
        for attempt in policy.retrying(deadline=deadline):
            with attempt:
                calls += 1
                raise error
    return calls


def test_a_retryable_failure_is_tried_the_policys_attempts_then_reraised() -> None:
    clock = Clock()
    policy = RetryPolicy(attempts=4, base_seconds=0.01, max_seconds=0.05, sleep=clock.sleep)
    assert _failing(policy, TransientCall("503")) == 4
    assert len(clock.sleeps) == 3 and all(0 <= s <= 0.05 for s in clock.sleeps)


def test_a_terminal_failure_is_never_retried() -> None:
    policy = RetryPolicy(attempts=4, sleep=lambda _: None)
    assert _failing(policy, TerminalError("refused")) == 1


def test_a_retry_after_is_waited_but_never_past_the_cap() -> None:
    clock = Clock()
    policy = RetryPolicy(attempts=3, base_seconds=0.001, max_seconds=0.5, sleep=clock.sleep)
    _failing(policy, TransientCall("429", retry_after=0.3))
    _failing(policy, TransientCall("429", retry_after=30.0))
    assert [round(s, 3) for s in clock.sleeps] == [0.3, 0.3, 0.5, 0.5]


def test_no_attempt_starts_when_the_deadline_leaves_too_little_time() -> None:
    clock = Clock()
    policy = RetryPolicy(
        attempts=10, base_seconds=1.0, max_seconds=1.0, sleep=clock.sleep, monotonic=lambda: clock.now
    )
    # Retry-After makes the next wait exactly 1 s: past the deadline, so no second attempt starts.
    calls = _failing(policy, TransientCall("429", retry_after=1.0), deadline=clock.now + 0.5)
    assert (calls, clock.sleeps) == (1, [])
