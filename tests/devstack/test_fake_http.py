"""What the loopback fakes share (devstack._fake_http): fault plans, call counts and hooks."""

from __future__ import annotations

import threading

import pytest

from devstack._fake_http import FaultPlan, Hooks, Knobs


def _in_thread(target: object) -> threading.Thread:
    thread = threading.Thread(target=target, daemon=True)  # type: ignore[arg-type]
    thread.start()
    return thread


def test_a_call_with_no_matching_hold_goes_straight_through() -> None:
    hooks = Hooks(max_hold_seconds=30)
    hold = hooks.hold("create_user", key="u1", until="never")
    hooks.gate("create_user", "u2")
    hooks.gate("processor_token", "u1")
    assert (hold.arrived.is_set(), hold.held) == (False, 0)


def test_a_hold_is_used_up_after_its_number_of_calls() -> None:
    hooks = Hooks()
    hold = hooks.hold("create_user", until="go", times=1)
    first = _in_thread(lambda: hooks.gate("create_user", "u1"))
    assert hold.wait_arrived(5)
    hooks.gate("create_user", "u1")  # the second call is not held
    hooks.set("go")
    first.join(5)
    assert (hold.held, first.is_alive()) == (1, False)


def test_an_event_set_before_the_call_arrives_does_not_hold_it() -> None:
    hooks = Hooks()
    hooks.set("go")
    hold = hooks.hold("create_user", until="go")
    hooks.gate("create_user", None)
    assert hold.released.is_set()


def test_a_forgotten_event_releases_the_call_after_max_hold_seconds() -> None:
    hooks = Hooks(max_hold_seconds=0.2)
    hold = hooks.hold("create_user", until="never-set")
    hooks.gate("create_user", None)
    assert hold.released.is_set()


def test_clear_lets_every_held_call_go() -> None:
    hooks = Hooks()
    hold = hooks.hold("create_user", until="never-set")
    waiting = _in_thread(lambda: hooks.gate("create_user", None))
    assert hold.wait_arrived(5)
    hooks.clear()
    waiting.join(5)
    assert not waiting.is_alive()


def test_a_hold_must_hold_at_least_one_call() -> None:
    with pytest.raises(ValueError):
        Hooks().hold("create_user", until="go", times=0)


def test_knobs_keep_one_plan_per_call_kind_and_refuse_unknown_kinds() -> None:
    knobs = Knobs(("a", "b"))
    knobs.set("a", FaultPlan(error_rate=1.0))
    assert (knobs.draw("a"), knobs.draw("b")) == ("5xx", None)
    with pytest.raises(ValueError):
        knobs.set("c", FaultPlan())


def test_knobs_count_calls_by_kind_and_status() -> None:
    knobs = Knobs(("a",))
    knobs.count("a", 200)
    knobs.count("a", 503)
    assert knobs.counts() == {"a": {"calls": 2, "200": 1, "503": 1}}
