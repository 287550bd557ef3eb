"""schema/table_writes.py: every write path's request, its item shape and its condition."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from schema.table import EntitlementStatus, cancellation_key, entitlement_key
from schema.table_writes import (
    business_time,
    cancellation_transaction,
    low_level,
    new_row_put,
    reactivation_transaction,
    save_if_active_request,
    second_signup_transaction,
    set_status,
    ttl_after,
)

NOW = datetime(2026, 1, 2, 3, 4, 5, 678_901, tzinfo=UTC)


def test_business_time_is_utc_to_the_millisecond_with_a_z() -> None:
    assert business_time(NOW.astimezone(timezone(timedelta(hours=2)))) == "2026-01-02T03:04:05.678Z"


def test_a_ttl_is_whole_epoch_seconds_days_after_now() -> None:
    assert ttl_after(NOW, 1) == int(NOW.timestamp()) + 86_400


def test_save_if_active_puts_exactly_the_image_only_over_an_active_row() -> None:
    image = low_level({"pk": "USER#u1", "sk": "ENTITLEMENT#a1"})
    request = save_if_active_request("t", image)
    assert (request["Item"], request["ConditionExpression"]) == (
        image,
        "attribute_exists(pk) AND #status = :active",
    )


def test_a_status_change_requires_the_status_it_moves_from() -> None:
    key = entitlement_key("u1", "a1")
    update = set_status("t", key, to=EntitlementStatus.CANCELLED, require=EntitlementStatus.ACTIVE, now=NOW)
    assert update["ExpressionAttributeValues"][":from"] == {"S": "Active"}
    assert "#status = :from" in update["ConditionExpression"]


def test_a_cancellation_moves_the_active_row_and_writes_the_record_naming_its_account() -> None:
    update, put = cancellation_transaction("t", "u1", "a1", ttl=123, now=NOW)
    assert update["Update"]["ExpressionAttributeValues"][":to"] == {"S": "Cancelled"}
    assert (put["Put"]["Item"]["arrayAccountId"], put["Put"]["Item"]["ttl"]) == ({"S": "a1"}, {"N": "123"})


def test_a_reactivation_deletes_the_cancellation_record_only_while_it_names_this_account() -> None:
    delete, _ = reactivation_transaction("t", "u1", "a1", now=NOW)
    assert delete["Delete"]["Key"] == low_level(cancellation_key("u1"))
    assert delete["Delete"]["ExpressionAttributeValues"] == {":account": {"S": "a1"}}


def test_a_new_row_never_overwrites_one() -> None:
    assert new_row_put("t", {})["ConditionExpression"] == "attribute_not_exists(pk)"


def test_a_second_signup_puts_the_new_row_retires_the_old_and_writes_its_stale_record() -> None:
    new_row = low_level({"pk": "USER#u1", "sk": "ENTITLEMENT#a2"})
    put, retire, stale = second_signup_transaction(
        "t", "u1", old_array_account_id="a1", new_row=new_row, stale_ttl=9, now=NOW
    )
    assert put["Put"]["Item"] == new_row
    assert retire["Update"]["ExpressionAttributeValues"][":to"] == {"S": "Superseded"}
    assert stale["Put"]["Item"]["arrayAccountId"] == {"S": "a1"}


def test_a_cancellation_record_never_replaces_one_naming_another_account() -> None:
    _, put = cancellation_transaction("t", "u1", "a1", ttl=123, now=NOW)
    assert put["Put"]["ConditionExpression"] == "attribute_not_exists(pk) OR arrayAccountId = :account"
    assert put["Put"]["ExpressionAttributeValues"] == {":account": {"S": "a1"}}


def test_a_cancellation_displacing_another_accounts_record_schedules_that_account_on_its_stale_key() -> None:
    _, put, stale = cancellation_transaction("t", "u1", "a2", ttl=123, now=NOW, displacing="a1", stale_ttl=9)
    assert put["Put"]["ExpressionAttributeValues"] == {":displaced": {"S": "a1"}}
    assert (stale["Put"]["Item"]["sk"], stale["Put"]["Item"]["ttl"]) == (
        {"S": "CLEANUP#STALE#a1"},
        {"N": "9"},
    )
