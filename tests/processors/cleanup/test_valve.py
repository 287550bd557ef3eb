"""processors/cleanup/_valve.py and where the cleanup procedure applies it: shadow mode sends no delete,
and past this process's hourly budget the work parks for the retry worker (nothing lost)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import REGISTRY

from config import CleanupSettings, Settings
from devstack.fake_array import FakeArrayServer
from processors.cleanup import CleanupHandler, DeleteValve
from processors.cleanup._valve import BUDGET_FILE_NAME
from processors.cleanup.retry_worker import RetryWorker
from schema.outcomes import OutcomeKind
from tests.processors.cleanup.cleanup_helpers import ListSink, make_expiry

K = OutcomeKind
HELD = "entitlements_cleanup_deletes_held_total"


class Ticking:
    """A monotonic clock the test moves."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def held() -> float:
    return REGISTRY.get_sample_value(HELD) or 0.0


def test_a_budget_refuses_deletes_past_its_count_within_the_hour() -> None:
    valve = DeleteValve(budget_per_hour=2, monotonic=Ticking())
    assert [valve.take(), valve.take(), valve.take()] == [True, True, False]


def test_the_budget_frees_as_the_hour_rolls_on() -> None:
    clock = Ticking()
    valve = DeleteValve(budget_per_hour=1, monotonic=clock)
    assert valve.take()
    clock.now += 3599.0
    assert not valve.take()
    clock.now += 1.0
    assert valve.take()


def test_without_a_budget_every_delete_may_be_sent() -> None:
    valve = DeleteValve()
    assert all(valve.take() for _ in range(10_000))


TAKER = """
import sys
from pathlib import Path
from processors.cleanup import DeleteValve
valve = DeleteValve(budget_per_hour=int(sys.argv[2]), shared_file=Path(sys.argv[1]))
print(sum(valve.take() for _ in range(int(sys.argv[3]))))
"""


def test_a_host_budget_holds_across_processes_taking_at_once(tmp_path: Path) -> None:
    shared = tmp_path / "state" / BUDGET_FILE_NAME
    takers = [
        subprocess.Popen(
            [sys.executable, "-c", TAKER, str(shared), "15", "10"], stdout=subprocess.PIPE, text=True
        )
        for _ in range(4)
    ]
    taken = [int(taker.communicate(timeout=120)[0]) for taker in takers]
    assert sum(taken) == 15  # 40 asked for, by four processes at once


def test_a_host_budget_frees_as_its_hour_rolls_on(tmp_path: Path) -> None:
    wall = Ticking()
    shared = tmp_path / BUDGET_FILE_NAME
    first = DeleteValve(budget_per_hour=1, shared_file=shared, wall=wall)
    second = DeleteValve(budget_per_hour=1, shared_file=shared, wall=wall)
    assert first.take()
    assert not second.take()
    wall.now += 3600.0
    assert second.take()


def test_an_unusable_budget_file_refuses_the_delete(tmp_path: Path) -> None:
    (tmp_path / "taken").write_text("a file where the state folder should be")
    valve = DeleteValve(budget_per_hour=10, shared_file=tmp_path / "taken" / BUDGET_FILE_NAME)
    assert not valve.take()


def test_the_host_scope_keeps_the_budget_in_the_state_folder(tmp_path: Path) -> None:
    settings = CleanupSettings(delete_budget_per_hour=5, delete_budget_scope="host")
    valve = DeleteValve.from_settings(settings, state_dir=tmp_path)
    assert valve.shared_file == tmp_path / BUDGET_FILE_NAME
    assert DeleteValve.from_settings(CleanupSettings(delete_budget_per_hour=5)).shared_file is None


def test_the_settings_name_the_mode_and_the_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENTITLEMENTS_CLEANUP__MODE", "shadow")
    monkeypatch.setenv("ENTITLEMENTS_CLEANUP__DELETE_BUDGET_PER_HOUR", "50")
    valve = DeleteValve.from_settings(Settings().cleanup)
    assert (valve.shadow, valve.budget_per_hour) == (True, 50)


def test_a_process_running_a_shadow_or_a_budget_says_so_once_in_its_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level("INFO", logger="processors.cleanup._valve"):
        DeleteValve.from_settings(CleanupSettings(mode="shadow"))
        DeleteValve.from_settings(CleanupSettings())
    [line] = [record for record in caplog.records if record.name == "processors.cleanup._valve"]
    assert (line.getMessage(), getattr(line, "mode", None)) == ("cleanup delete valve", "shadow")


def test_a_mode_other_than_live_or_shadow_and_a_budget_below_one_are_refused() -> None:
    with pytest.raises(ValueError, match="mode"):
        CleanupSettings(mode="dry")
    with pytest.raises(ValueError, match="delete_budget_per_hour"):
        CleanupSettings(delete_budget_per_hour=0)


def test_shadow_mode_records_would_delete_sends_no_delete_and_leaves_the_row(
    make_handler: Callable[..., CleanupHandler],
    fake_array: FakeArrayServer,
    put_row: Callable[[str, str, str], None],
    get_row: Callable[[str, str], dict[str, str] | None],
    drain_queue: Callable[[str], list[dict[str, Any]]],
    retry_queues: Any,
    sink: ListSink,
) -> None:
    fake_array.add_users(["acct-1"])
    put_row("u1", "acct-1", "Superseded")
    handler = make_handler(valve=DeleteValve(shadow=True))
    handler.add(make_expiry("u1", "acct-1"))
    handler.flush()
    assert fake_array.calls() == []
    assert sink.kinds() == [K.CLEANUP_WOULD_DELETE]
    assert (get_row("u1", "acct-1") or {})["status"] == "Superseded"
    assert drain_queue(retry_queues.queue_url) == []


def test_shadow_mode_still_applies_the_guard(
    make_handler: Callable[..., CleanupHandler],
    fake_array: FakeArrayServer,
    put_row: Callable[[str, str, str], None],
    sink: ListSink,
) -> None:
    fake_array.add_users(["acct-1"])
    put_row("u1", "acct-1", "Active")
    handler = make_handler(valve=DeleteValve(shadow=True))
    handler.add(make_expiry("u1", "acct-1"))
    handler.flush()
    assert sink.kinds() == [K.CLEANUP_REFUSED_BY_GUARD]


def test_past_the_budget_cleanup_parks_its_work_and_the_figure_rises(
    make_handler: Callable[..., CleanupHandler],
    fake_array: FakeArrayServer,
    put_row: Callable[[str, str, str], None],
    drain_queue: Callable[[str], list[dict[str, Any]]],
    retry_queues: Any,
    sink: ListSink,
) -> None:
    fake_array.add_users(["acct-1", "acct-2", "acct-3"])
    for user, account in (("u1", "acct-1"), ("u2", "acct-2"), ("u3", "acct-3")):
        put_row(user, account, "Superseded")
    before = held()
    handler = make_handler(valve=DeleteValve(budget_per_hour=1), concurrency=1)
    for user, account in (("u1", "acct-1"), ("u2", "acct-2"), ("u3", "acct-3")):
        handler.add(make_expiry(user, account))
    handler.flush()
    assert len(fake_array.deleted_users()) == 1
    assert sorted(sink.kinds()) == sorted(
        [K.CLEANUP_DELETED, K.CLEANUP_ROW_MARKED, K.CLEANUP_PARKED, K.CLEANUP_PARKED]
    )
    assert {o.detail for o in sink.outcomes if o.kind is K.CLEANUP_PARKED} == {"delete_budget"}
    assert len(drain_queue(retry_queues.queue_url)) == 2
    assert held() == before + 2


def test_work_parked_by_the_budget_is_deleted_by_the_retry_worker_within_its_own(
    make_handler: Callable[..., CleanupHandler],
    fake_array: FakeArrayServer,
    put_row: Callable[[str, str, str], None],
    get_row: Callable[[str, str], dict[str, str] | None],
    sqs: Any,
    dynamodb: Any,
    table: str,
    retry_queues: Any,
    array_client: Any,
    clock: Any,
    sink: ListSink,
) -> None:
    fake_array.add_users(["acct-1", "acct-2"])
    put_row("u1", "acct-1", "Superseded")
    put_row("u2", "acct-2", "Superseded")
    handler = make_handler(valve=DeleteValve(budget_per_hour=1), concurrency=1)
    handler.add(make_expiry("u1", "acct-1"))
    handler.add(make_expiry("u2", "acct-2"))
    handler.flush()
    worker = RetryWorker(
        sqs=sqs,
        dynamodb=dynamodb,
        array=array_client,
        table_name=table,
        queue_url=retry_queues.queue_url,
        sink=sink,
        clock=clock,
        retry_budget_seconds=3.0,
        repark_base_delay_seconds=0,
        wait_time_seconds=0,
        valve=DeleteValve(budget_per_hour=1),
    )
    report = worker.drain(max_seconds=30)
    assert report.empty
    assert sorted(fake_array.deleted_users()) == ["acct-1", "acct-2"]
    assert {(get_row(u, a) or {})["status"] for u, a in (("u1", "acct-1"), ("u2", "acct-2"))} == {"Removed"}


def test_the_retry_worker_past_its_budget_reparks_and_sends_nothing(
    make_handler: Callable[..., CleanupHandler],
    fake_array: FakeArrayServer,
    put_row: Callable[[str, str, str], None],
    drain_queue: Callable[[str], list[dict[str, Any]]],
    sqs: Any,
    dynamodb: Any,
    table: str,
    retry_queues: Any,
    array_client: Any,
    clock: Any,
    sink: ListSink,
) -> None:
    fake_array.add_users(["acct-1", "acct-2"])
    put_row("u1", "acct-1", "Superseded")
    put_row("u2", "acct-2", "Superseded")
    handler = make_handler(valve=DeleteValve(budget_per_hour=1), concurrency=1)
    handler.add(make_expiry("u1", "acct-1"))
    handler.add(make_expiry("u2", "acct-2"))
    handler.flush()
    spent = DeleteValve(budget_per_hour=1)
    assert spent.take()
    worker = RetryWorker(
        sqs=sqs,
        dynamodb=dynamodb,
        array=array_client,
        table_name=table,
        queue_url=retry_queues.queue_url,
        sink=sink,
        clock=clock,
        retry_budget_seconds=3.0,
        repark_base_delay_seconds=0,
        wait_time_seconds=0,
        valve=spent,
    )
    worker.run_once()
    assert len(fake_array.deleted_users()) == 1
    [reparked] = drain_queue(retry_queues.queue_url)
    assert json.loads(reparked["Body"])["park_reason"] == "delete_budget"
