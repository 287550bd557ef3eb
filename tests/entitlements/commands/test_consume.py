"""`entitlements replay-parked` (`entitlements consumer-status`: test_consumer_status.py)."""

from __future__ import annotations

import signal
from datetime import UTC, datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

from analytics import lake_from_settings
from analytics.lake.views import connect
from config import load_settings
from devstack import _writes as writes
from devstack.fake_array import FakeArrayServer
from entitlements import compose
from entitlements.commands.consume import app
from pipeline.parking import RawRecord
from pipeline.tables import create_table
from schema.errors import TerminalError
from schema.outcomes import OutcomeKind
from schema.table import EntitlementStatus
from tests.entitlements.commands._stored import StateDir, stream_record, use_handlers
from tests.pipeline._consumer_fakes import STREAM, Recorder, registry_of
from tests.support.dynamodb import REGION, client, unique_table_name
from tests.support.stream_records import ttl_removal

runner = CliRunner()


@pytest.fixture
def state(tmp_path: Path) -> StateDir:
    return StateDir(tmp_path / "state")


def park(state: StateDir, handler: str, *records: bytes) -> None:
    state.parked.park(
        handler=handler,
        stream_arn=STREAM,
        shard_id="shardId-1",
        records=[RawRecord(data, str(100 + i)) for i, data in enumerate(records)],
        reason="OSError",
    )


def test_replay_parked_with_a_poison_record_replays_the_good_ones_and_exits_0(
    state: StateDir, monkeypatch: pytest.MonkeyPatch
) -> None:
    park(state, "lake", stream_record("e-1", "100"), b"not json", stream_record("e-3", "102"))
    lake = Recorder("lake")
    use_handlers(monkeypatch, registry_of(lake))
    result = runner.invoke(app, ["replay-parked"], env=state.env)
    assert (result.exit_code, lake.flushed) == (0, ["e-1", "e-3"])
    assert (state.parked.count(), state.quarantine.count(), state.dead_letters.count()) == (0, 1, 0)


def test_replay_parked_replays_around_a_damaged_file_names_it_on_one_line_and_exits_1(
    state: StateDir, monkeypatch: pytest.MonkeyPatch
) -> None:
    park(state, "lake", stream_record("e-1", "100"))
    damaged = state.root / "parked" / "lake" / "damaged.json"
    damaged.write_bytes(b"{}")
    lake = Recorder("lake")
    use_handlers(monkeypatch, registry_of(lake))
    result = runner.invoke(app, ["replay-parked"], env=state.env)
    assert (result.exit_code, lake.flushed) == (1, ["e-1"])
    assert result.stderr.splitlines()[-1:] == [
        f"replay-parked: 1 damaged file skipped, left in place: {damaged}"
    ]


def test_replay_parked_exits_1_while_a_batch_stays_parked(
    state: StateDir, monkeypatch: pytest.MonkeyPatch
) -> None:
    park(state, "lake", stream_record("e-1"))
    use_handlers(monkeypatch, registry_of(Recorder("lake", failures=[TerminalError("disk full")])))
    result = runner.invoke(app, ["replay-parked"], env=state.env)
    assert (result.exit_code, state.parked.count()) == (1, 1)
    assert "1 still parked" in result.stdout


def test_replay_parked_with_a_registry_it_cannot_order_is_one_line_and_exit_1(
    state: StateDir, monkeypatch: pytest.MonkeyPatch
) -> None:
    park(state, "lake", stream_record("e-1"))
    use_handlers(monkeypatch, registry_of(Recorder("cleanup"), feeds={"cleanup": ("lake",)}))
    result = runner.invoke(app, ["replay-parked"], env=state.env)
    assert (result.exit_code, len(result.stderr.splitlines())) == (1, 1)
    assert state.parked.count() == 1


# -- with the real composition: cleanup on moto and the fake Array, outcomes in the lake --------------


def ttl_expiry(user: str, account: str, *, event_id: str, seq: str, now: datetime) -> bytes:
    """DynamoDB's TTL removing the user's cancellation record, as the adapter delivers it."""
    old = writes.cancellation_record(user, account, ttl={"N": str(int(now.timestamp()) - 86_400)}, now=now)
    return ttl_removal(
        old, event_id=event_id, sequence_number=seq, created_at_ms=int(now.timestamp() * 1000), size_bytes=100
    )


def test_replaying_a_parked_cleanup_batch_deletes_the_accounts_and_lands_their_outcomes(
    moto_endpoint: str, tmp_path: Path
) -> None:
    now = datetime.now(UTC)
    table = unique_table_name("replay")
    create_table(client(moto_endpoint, "dynamodb"), table)
    with FakeArrayServer() as array:
        env = {
            "ENTITLEMENTS_AWS__ENDPOINT_URL": moto_endpoint,
            "ENTITLEMENTS_AWS__REGION": REGION,
            "ENTITLEMENTS_AWS__ACCESS_KEY_ID": "testing",
            "ENTITLEMENTS_AWS__SECRET_ACCESS_KEY": "testing",
            "ENTITLEMENTS_CONSUMER__TABLE_NAME": table,
            "ENTITLEMENTS_CONSUMER__STATE_DIR": str(tmp_path / "state"),
            "ENTITLEMENTS_LAKE__ROOT": str(tmp_path / "lake"),
            "ENTITLEMENTS_ARRAY__BASE_URL": array.url,
        }
        settings = load_settings(
            aws={
                "endpoint_url": moto_endpoint,
                "region": REGION,
                "access_key_id": "t",
                "secret_access_key": "t",
            },
            consumer={"table_name": table, "state_dir": tmp_path / "state"},
        )
        compose.setup_retry_queues(settings)
        accounts = ["acct-r1", "acct-r2"]
        for i, account in enumerate(accounts):
            user = f"user-r{i}"
            row = writes.entitlement_row(
                user, account, status=EntitlementStatus.CANCELLED, processor_token="t", now=now
            )
            client(moto_endpoint, "dynamodb").put_item(**writes.signup_put(table, row))
        array.add_users(accounts)
        state = StateDir(tmp_path / "state")
        park(
            state,
            "cleanup",
            *(
                ttl_expiry(f"user-r{i}", a, event_id=f"ttl-{i}", seq=str(100 + i), now=now)
                for i, a in enumerate(accounts)
            ),
        )

        result = runner.invoke(app, ["replay-parked"], env=env)

        assert (result.exit_code, state.parked.count()) == (0, 0), result.output
        assert [array.has_user(account) for account in accounts] == [False, False]
    with connect(lake_from_settings(load_settings(lake={"root": str(tmp_path / "lake")}))) as con:
        deleted = con.execute(
            "SELECT array_account_id FROM outcomes WHERE kind = ? ORDER BY 1",
            [OutcomeKind.CLEANUP_DELETED.value],
        ).fetchall()
    assert [account for (account,) in deleted] == accounts


# -- consume's last line ------------------------------------------------------------------------------


def test_consume_says_it_stopped_and_on_which_signal_when_it_stops(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from entitlements.commands import consume as command  # noqa: PLC0415

    handlers: dict[int, object] = {}
    monkeypatch.setattr(command.signal, "signal", lambda signum, handler: handlers.update({signum: handler}))
    monkeypatch.setattr(compose, "launcher", lambda settings: None)

    def supervised(settings: object, spec: object, worker: str, stop: object) -> int:
        handlers[signal.SIGTERM](signal.SIGTERM, None)  # type: ignore[operator]
        return 0

    monkeypatch.setattr(command, "_supervise_with_metrics", supervised)
    env = {"ENTITLEMENTS_CONSUMER__STATE_DIR": str(tmp_path / "state"), "ENTITLEMENTS_AWS__REGION": REGION}
    result = runner.invoke(app, ["consume", "--stream-arn", STREAM, "--worker-id", "w1"], env=env)
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines()[-1] == (
        "consume: stopped on SIGTERM; the KCL daemon checkpointed what it had flushed and exited"
    )


def test_consume_of_a_kinesis_source_reads_its_stream_without_looking_up_the_tables_dynamodb_stream(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from entitlements.commands import consume as command  # noqa: PLC0415

    kinesis = "arn:aws:kinesis:eu-west-1:123456789012:stream/entitlements-changes"
    specs: list[object] = []
    monkeypatch.setattr(compose, "launcher", lambda settings: None)
    monkeypatch.setattr(command.signal, "signal", lambda signum, handler: None)

    def no_lookup(settings: object, **kwargs: object) -> str:
        raise AssertionError("the table's DynamoDB stream was looked up")

    def supervised(settings: object, spec: object, worker: str, stop: object) -> int:
        specs.append(spec)
        return 0

    monkeypatch.setattr(compose, "table_stream_arn", no_lookup)
    monkeypatch.setattr(command, "_supervise_with_metrics", supervised)
    env = {
        "ENTITLEMENTS_CONSUMER__STATE_DIR": str(tmp_path / "state"),
        "ENTITLEMENTS_AWS__REGION": REGION,
        "ENTITLEMENTS_SOURCE__KIND": "kinesis",
        "ENTITLEMENTS_SOURCE__STREAM_ARN": kinesis,
    }
    result = runner.invoke(app, ["consume", "--worker-id", "w1"], env=env)
    assert (result.exit_code, len(specs)) == (0, 1), result.output
    properties = (tmp_path / "state" / "daemon" / "launcher-w1.properties").read_text()
    assert (f"kinesisStreamArn = {kinesis}\n" in properties, "streamArn =" in properties) == (True, False)


def test_the_stopped_line_says_when_the_daemon_had_to_be_killed() -> None:
    from entitlements.commands.consume import stopped_line  # noqa: PLC0415

    assert stopped_line("SIGINT", -9) == (
        "consume: stopped on SIGINT; the KCL daemon did not exit in time and was killed (SIGKILL): "
        "records after its last checkpoint are delivered again"
    )


def test_the_stopped_line_gives_a_failed_daemons_exit_status() -> None:
    from entitlements.commands.consume import stopped_line  # noqa: PLC0415

    assert stopped_line("SIGTERM", 1) == "consume: stopped on SIGTERM; the KCL daemon exited with status 1"
