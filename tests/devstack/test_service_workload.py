"""The workload through the service (devstack.service_workload): what the clients may send, and when."""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from devstack.fake_array import PROCESSOR_TOKEN
from devstack.service_workload import WorkloadConfig, _Model, _User, run_service_workload
from devstack.workload import Mix, Operation
from entitlements._workload import local_service
from pipeline.tables import TableDescription
from tests.support.dynamodb import items_of
from tests.support.local_world import World, local_world


def drive(model: _Model, steps: int, seed: int = 0) -> list[tuple[str, Operation, _User]]:
    """Choose and finish operations in a random interleaving, as concurrent clients would; return the
    log of starts and ends."""
    rng = random.Random(seed)
    in_flight: list[tuple[Operation, _User]] = []
    log: list[tuple[str, Operation, _User]] = []
    for _ in range(steps):
        chosen = model.choose() if rng.random() < 0.6 or not in_flight else None
        if chosen is not None:
            in_flight.append(chosen)
            log.append(("start", *chosen))
        elif in_flight:
            operation, user = in_flight.pop(rng.randrange(len(in_flight)))
            model.finish(
                operation, user, 201 if operation in (Operation.SIGNUP, Operation.SECOND_SIGNUP) else 200
            )
            log.append(("end", operation, user))
    return log


def test_no_user_gets_another_request_before_their_signup_has_answered() -> None:
    log = drive(_Model(WorkloadConfig(users=5, operations=0, seed=1)), 2000)
    signed_up: set[int] = set()
    for event, operation, user in log:
        if event == "end" and operation is Operation.SIGNUP:
            signed_up.add(id(user))
        elif event == "start":
            assert operation is Operation.SIGNUP or id(user) in signed_up


def test_each_user_signs_up_once() -> None:
    log = drive(_Model(WorkloadConfig(users=5, operations=0, seed=2)), 2000)
    signups = [
        id(user) for event, operation, user in log if event == "start" and operation is Operation.SIGNUP
    ]
    assert sorted(signups) == sorted(set(signups))


def test_at_most_one_request_other_than_a_relink_is_in_flight_per_user() -> None:
    log = drive(_Model(WorkloadConfig(users=4, operations=0, seed=3)), 3000)
    busy: dict[int, int] = {}
    for event, operation, user in log:
        if operation is Operation.RELINK:
            continue
        busy[id(user)] = busy.get(id(user), 0) + (1 if event == "start" else -1)
        assert busy[id(user)] <= 1


def test_with_full_contention_second_signups_and_cancellations_race_relinks() -> None:
    model = _Model(WorkloadConfig(users=10, operations=0, seed=4, contention=1.0))
    log = drive(model, 3000, seed=4)
    relinking: set[int] = set()
    raced = 0
    for event, operation, user in log:
        if operation is Operation.RELINK:
            (relinking.add if event == "start" else relinking.discard)(id(user))
        elif event == "start" and operation in (Operation.CANCEL, Operation.SECOND_SIGNUP):
            raced += id(user) in relinking
    assert raced > 50


def test_a_user_whose_request_was_refused_is_left_alone() -> None:
    model = _Model(WorkloadConfig(users=1, operations=0, mix=Mix(relink=0, reactivate=0)))
    operation, user = model.choose() or (None, None)
    assert operation is Operation.SIGNUP and user is not None
    model.finish(operation, user, 201)
    cancel = model.choose()
    assert cancel is not None
    model.finish(cancel[0], cancel[1], 409)
    assert model.choose() is None


def test_the_configuration_refuses_impossible_values() -> None:
    with pytest.raises(ValueError):
        WorkloadConfig(clients=0)
    with pytest.raises(ValueError):
        WorkloadConfig(contention=1.5)


# ---- against the service on the local stack ---------------------------------------------------------


@pytest.fixture
def world(moto_endpoint: str, table: TableDescription, tmp_path: Path) -> Iterator[World]:
    with local_world(endpoint=moto_endpoint, table_name=table.table_name, state_dir=tmp_path) as running:
        yield running


def active_rows_by_user(dynamodb: Any, table: TableDescription) -> dict[str, int]:
    counts: dict[str, int] = {}
    for item in items_of(dynamodb, table.table_name):
        if item["sk"]["S"].startswith("ENTITLEMENT#") and item["status"]["S"] == "Active":
            counts[item["userId"]["S"]] = counts.get(item["userId"]["S"], 0) + 1
    return counts


def test_through_the_service_every_answer_is_counted_once(world: World) -> None:
    with local_service(world.settings) as running:
        summary = run_service_workload(WorkloadConfig(users=8, operations=60, clients=4, seed=5), running.url)
    answered = sum(sum(by.values()) for by in summary.answers.values()) + summary.transport_errors
    assert answered == sum(summary.operations.values()) == 60 - summary.idle


def test_with_save_if_active_a_contended_workload_leaves_no_user_with_two_active_rows(
    world: World, dynamodb: Any, table: TableDescription
) -> None:
    world.array.set_faults(call=PROCESSOR_TOKEN, latency_seconds=0.03)
    config = WorkloadConfig(users=10, operations=120, clients=6, seed=6, contention=1.0)
    with local_service(world.settings) as running:
        summary = run_service_workload(config, running.url)
    active = active_rows_by_user(dynamodb, table)
    # Signups did succeed (the fresh-clone run on 906a1b8 found no Active row at all once, under load):
    # the answers say how each request ended if none did.
    assert active, (summary.answers, summary.transport_errors)
    assert max(active.values()) == 1


def test_through_the_service_same_user_bursts_leave_no_user_with_two_active_rows(
    world: World, dynamodb: Any, table: TableDescription
) -> None:
    config = WorkloadConfig(users=10, operations=60, clients=4, seed=7, concurrent_same_user=40.0)
    with local_service(world.settings) as running:
        summary = run_service_workload(config, running.url)
    assert summary.same_user is not None
    assert (summary.same_user.bursts > 0, summary.same_user.undocumented) == (True, 0)
    assert max(active_rows_by_user(dynamodb, table).values()) == 1


class _SameUserRecorder:
    """A stand-in service that answers after the requests of one user's burst have all arrived (or 5 s
    passed), and records how many requests of one user were in flight at once."""

    def __init__(self) -> None:
        self.lock = threading.Condition()
        self.in_flight: dict[str, int] = {}
        self.most_at_once: dict[str, int] = {}
        self.answered: dict[str, int] = {}

    def handler(self, request: httpx.Request) -> httpx.Response:
        user = request.url.path.split("/")[1]
        if request.url.path == "/stats":
            return httpx.Response(200, json={})
        with self.lock:
            self.in_flight[user] = self.in_flight.get(user, 0) + 1
            self.most_at_once[user] = max(self.most_at_once.get(user, 0), self.in_flight[user])
            self.lock.notify_all()
            self.lock.wait_for(lambda: self.in_flight[user] >= 2, timeout=5.0)
            self.in_flight[user] -= 1
            first = self.answered.get(user, 0) == 0
            self.answered[user] = self.answered.get(user, 0) + 1
        if first:
            return httpx.Response(201, json={"arrayAccountId": "a"})
        return httpx.Response(409, json={"error": "concurrent_request", "message": "lost"})


def test_concurrent_same_user_sends_simultaneous_requests_for_one_user() -> None:
    recorder = _SameUserRecorder()
    http = httpx.Client(base_url="http://127.0.0.1:9", transport=httpx.MockTransport(recorder.handler))
    config = WorkloadConfig(users=4, operations=0, clients=1, seed=5, concurrent_same_user=50.0)
    summary = run_service_workload(config, "http://127.0.0.1:9", http=http)
    assert summary.same_user is not None
    assert summary.same_user.bursts >= 1
    assert max(recorder.most_at_once.values()) == 2
    assert summary.same_user.overlapped == summary.same_user.bursts


def test_a_409_concurrent_request_is_counted_as_the_documented_answer_not_a_failure() -> None:
    recorder = _SameUserRecorder()
    http = httpx.Client(base_url="http://127.0.0.1:9", transport=httpx.MockTransport(recorder.handler))
    config = WorkloadConfig(users=4, operations=0, clients=1, seed=6, concurrent_same_user=50.0)
    summary = run_service_workload(config, "http://127.0.0.1:9", http=http)
    assert summary.same_user is not None
    assert (summary.same_user.concurrent_request, summary.same_user.undocumented) == (
        summary.same_user.bursts,
        0,
    )


def test_without_concurrent_same_user_no_burst_is_sent() -> None:
    recorder = _SameUserRecorder()
    http = httpx.Client(base_url="http://127.0.0.1:9", transport=httpx.MockTransport(recorder.handler))
    summary = run_service_workload(
        WorkloadConfig(users=2, operations=0, clients=1), "http://127.0.0.1:9", http=http
    )
    assert (summary.same_user, recorder.most_at_once) == (None, {})
