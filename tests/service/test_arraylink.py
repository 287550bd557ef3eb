"""arraylink (service/arraylink.py) and SaveIfActive (service/dynamo.py): read the Active row, resolve
the primary account, post the processor token to Array, put back exactly the image read if it is still
Active; bounded retries on transient failures; the processor token never leaves its SecretStr."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from config import ConsumerSettings, LakeSettings, Settings
from entitlements import compose
from schema.errors import TerminalError
from schema.outcomes import OutcomeKind
from service.arraylink import ArrayLink, ErrEntitlementNotActive, link_and_record
from service.dynamo import LowLevelItem
from service.errors import DownstreamRefusal, ServiceUnavailableError
from tests.service.conftest import CANARY, World, build_world


def _signed_up(world: World, user: str) -> str:
    return world.parts.service.signup(user).array_account_id


class _RecordingTable:
    """The table arraylink uses, remembering the image it read and the image it put back."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.read: list[LowLevelItem] = []
        self.saved: list[LowLevelItem] = []

    def active_row(self, user_id: str) -> LowLevelItem:
        image: LowLevelItem = self._inner.active_row(user_id)
        self.read.append(image)
        return image

    def save_if_active(self, image: LowLevelItem) -> None:
        self.saved.append(image)
        self._inner.save_if_active(image)


def test_the_write_back_is_exactly_the_image_read(world: World) -> None:
    _signed_up(world, "u-1")
    table = _RecordingTable(world.table)
    link = ArrayLink(table, world.transactions, world.array)
    link.link("u-1")
    assert table.saved == table.read
    assert len(table.saved) == 1


def test_save_if_active_refuses_a_row_that_is_gone_with_the_terminal_err_entitlement_not_active(
    world: World,
) -> None:
    account = _signed_up(world, "u-1")
    table = world.table
    image = table.active_row("u-1")
    world.dynamodb.delete_item(
        TableName=world.table_name, Key={"pk": {"S": "USER#u-1"}, "sk": {"S": f"ENTITLEMENT#{account}"}}
    )
    with pytest.raises(ErrEntitlementNotActive) as refused:
        table.save_if_active(image)
    assert isinstance(refused.value, TerminalError)
    assert world.item("USER#u-1", f"ENTITLEMENT#{account}") is None  # not written back


def test_a_transient_array_failure_is_retried_and_the_link_then_lands(world: World) -> None:
    account = _signed_up(world, "u-1")
    world.fake.token_statuses = [503, 429]
    linked = world.parts.arraylink.link("u-1")
    assert linked.array_account_id == account
    assert world.fake.calls["processor_token"] == 3


def test_array_failing_through_every_retry_is_service_unavailable(world: World) -> None:
    _signed_up(world, "u-1")
    world.fake.token_statuses = [500, 502, 503, 200]
    with pytest.raises(ServiceUnavailableError) as failed:
        world.parts.arraylink.link("u-1")
    assert failed.value.code == "array_unavailable"
    assert world.fake.calls["processor_token"] == 3  # bounded: the policy's attempts, no more


def test_a_link_for_a_row_that_is_no_longer_active_never_calls_array(world: World) -> None:
    _signed_up(world, "u-1")
    world.parts.service.cancel("u-1")
    with pytest.raises(ErrEntitlementNotActive):
        world.parts.arraylink.link("u-1")
    assert world.fake.calls["processor_token"] == 0


def _lake_text(root: Path) -> tuple[str, list[str]]:
    """Every value of every Parquet file under the lake, as text, and the outcome kinds among them."""
    tables = [pq.read_table(path) for path in sorted(root.rglob("*.parquet"))]
    text = " ".join(str(table.to_pylist()) for table in tables)
    kinds = [kind for table in tables if "kind" in table.column_names for kind in table["kind"].to_pylist()]
    return text, kinds


def test_the_processor_token_is_in_no_log_error_outcome_or_lake_file(
    dynamodb: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    lake_settings = LakeSettings(root=str(tmp_path / "lake"))
    settings = Settings(lake=lake_settings, consumer=ConsumerSettings(state_dir=tmp_path / "state"))
    lake = compose.lake_handler(settings, name="service-outcomes")  # the production sink and filter
    world = build_world(dynamodb, sink=lake)
    caplog.set_level(logging.DEBUG)
    for user in ("u-1", "u-2", "u-3", "u-4"):
        _signed_up(world, user)
    world.parts.service.cancel("u-3")  # u-3: not active
    errors: list[BaseException] = []
    kinds = []
    for user, statuses in (("u-1", []), ("u-2", [400]), ("u-3", [])):  # u-2: Array refuses the token
        world.fake.token_statuses = statuses
        attempt = link_and_record(world.parts.arraylink, world.parts.recorder, user, job_id=f"job-{user}")
        kinds.append(attempt.kind)
        if attempt.error is not None:
            errors.append(attempt.error)
    world.fake.token_statuses = [503, 503, 503]  # u-4: Array keeps failing
    with pytest.raises(ServiceUnavailableError) as unavailable:
        world.parts.arraylink.link("u-4")
    errors.append(unavailable.value)
    world.parts.recorder.flush()

    assert kinds == [OutcomeKind.LINK_LINKED, OutcomeKind.LINK_FAILED, OutcomeKind.LINK_NOT_ACTIVE]
    assert isinstance(errors[0], DownstreamRefusal)
    assert world.fake.tokens_received  # the token did reach Array
    assert CANARY not in caplog.text
    for error in errors:
        assert CANARY not in f"{error} {error!r} {error.args}"
    assert lake.name == "service-outcomes"
    text, landed = _lake_text(tmp_path / "lake")
    created = [OutcomeKind.ARRAY_ACCOUNT_CREATED.value] * 4  # each signup's account, landed too
    assert sorted(landed) == sorted([kind.value for kind in kinds] + created)  # every outcome landed
    assert CANARY not in text
    files = [path for path in (tmp_path / "lake").rglob("*") if path.is_file()]
    assert all(CANARY.encode() not in path.read_bytes() for path in files)
