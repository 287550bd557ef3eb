"""The accounts Array creates for a signup or a second signup, each recorded (`array.account_created`)
before the write naming it: an account whose write never lands is what the audit
`array_account_without_row` finds (analytics/sql/audits/array_account_without_row.sql)."""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.service.conftest import World


def _signed_up(client: TestClient, user: str) -> str:
    answer = client.post(f"/{user}/signup")
    assert answer.status_code == 201
    return str(answer.json()["arrayAccountId"])


def test_signup_records_the_account_array_created(world: World) -> None:
    with world.client() as client:
        account = _signed_up(client, "u-1")
    assert world.accounts_created() == [("u-1", account)]
    assert [o.detail for o in world.sink.outcomes] == ["signup"]


def test_a_signup_whose_write_fails_leaves_the_account_created_on_record(world: World) -> None:
    """The account Array created has no row: its outcome is what the audit
    (array_account_without_row) finds once the grace has passed."""
    world.counting.fail_transacts = 3
    with world.client() as client:
        answer = client.post("/u-1/signup")
    assert answer.status_code == 503
    assert world.accounts_created() == [("u-1", world.fake.accounts["u-1"][0])]
    assert world.item("USER#u-1", f"ENTITLEMENT#{world.fake.accounts['u-1'][0]}") is None


def test_a_second_signup_failing_after_array_created_the_account_leaves_it_on_record(
    world: World,
) -> None:
    with world.client() as client:
        old = _signed_up(client, "u-1")
        world.counting.fail_transacts = 3
        client.post("/u-1/array-signup")
    new = world.fake.accounts["u-1"][-1]
    assert world.accounts_created() == [("u-1", old), ("u-1", new)]
    assert world.item("USER#u-1", f"ENTITLEMENT#{new}") is None


def test_a_second_signup_answered_with_the_account_held_records_no_account_created(
    world: World,
) -> None:
    with world.client() as client:
        account = _signed_up(client, "u-1")
        world.fake.same_account = True
        client.post("/u-1/array-signup")
    assert world.accounts_created() == [("u-1", account)]
