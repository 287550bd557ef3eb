"""The fault-injection wrapper (devstack.unguarded_links): the link write as an unconditional put, for
the local stack only."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from devstack.unguarded_links import FaultInjectionRefused, UnguardedLinkTable, assert_all_loopback
from pipeline.tables import TableDescription
from service.dynamo import EntitlementTable
from tests.support.dynamodb import get_item
from tests.support.local_world import world_settings

ROW = {
    "pk": {"S": "USER#u1"},
    "sk": {"S": "ENTITLEMENT#a1"},
    "userId": {"S": "u1"},
    "arrayAccountId": {"S": "a1"},
    "status": {"S": "Active"},
}


def settings(tmp_path: Path, **changes: str) -> Any:
    urls = {
        "endpoint": "http://127.0.0.1:1",
        "array_url": "http://127.0.0.1:2",
        "transactions_url": "http://[::1]:3",
    }
    urls.update(changes)
    return world_settings(table_name="t", state_dir=tmp_path, **urls)


def test_every_loopback_endpoint_is_accepted(tmp_path: Path) -> None:
    assert_all_loopback(settings(tmp_path))


@pytest.mark.parametrize(
    ("change", "role"),
    [
        ({"endpoint": "https://dynamodb.eu-west-1.amazonaws.com"}, "aws.dynamodb"),
        ({"array_url": "https://array.example.com"}, "array.base_url"),
        ({"transactions_url": "http://10.0.0.5:80"}, "service.transactions_base_url"),
    ],
)
def test_any_endpoint_off_loopback_refuses_the_wrapper_naming_its_role(
    tmp_path: Path, change: dict[str, str], role: str
) -> None:
    with pytest.raises(FaultInjectionRefused, match=re.escape(f"{role} is not loopback")):
        assert_all_loopback(settings(tmp_path, **change))


def test_no_aws_endpoint_at_all_means_real_aws_and_is_refused(tmp_path: Path) -> None:
    base = settings(tmp_path)
    real = base.model_copy(update={"aws": base.aws.model_copy(update={"endpoint_url": None})})
    with pytest.raises(FaultInjectionRefused, match=r"aws\.dynamodb"):
        assert_all_loopback(real)


def _wrapper(dynamodb: Any, table: TableDescription) -> UnguardedLinkTable:
    return UnguardedLinkTable(EntitlementTable(dynamodb, table.table_name), dynamodb)


def test_a_stale_image_is_put_back_over_a_superseded_row_and_counted_as_overwritten(
    dynamodb: Any, table: TableDescription
) -> None:
    dynamodb.put_item(TableName=table.table_name, Item={**ROW, "status": {"S": "Superseded"}})
    wrapper = _wrapper(dynamodb, table)
    wrapper.save_if_active(ROW)
    row = get_item(dynamodb, table.table_name, "USER#u1", "ENTITLEMENT#a1")
    assert row is not None
    assert (row["status"], wrapper.snapshot()["overwritten"]) == (
        {"S": "Active"},
        1,
    )


def test_an_image_put_back_over_a_cancelled_row_is_counted_apart(
    dynamodb: Any, table: TableDescription
) -> None:
    dynamodb.put_item(TableName=table.table_name, Item={**ROW, "status": {"S": "Cancelled"}})
    wrapper = _wrapper(dynamodb, table)
    wrapper.save_if_active(ROW)
    assert wrapper.snapshot() == {
        "overwritten": 0,
        "overwritten_cancelled": 1,
        "recreated": 0,
        "unchanged": 0,
    }


def test_an_image_put_back_over_the_same_active_row_is_unchanged(
    dynamodb: Any, table: TableDescription
) -> None:
    dynamodb.put_item(TableName=table.table_name, Item=ROW)
    wrapper = _wrapper(dynamodb, table)
    wrapper.save_if_active(ROW)
    assert wrapper.snapshot()["unchanged"] == 1
