"""The service's refusals, each forced through the test doubles (tests/service/conftest.py): unknown
users, the transaction races, downstream services unavailable or refusing, and answers the service
cannot use. Each is a JSON body naming its code, and what it writes (or not) is stated."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from schema.outcomes import OutcomeKind
from schema.table_writes import entitlement_row
from tests.service.conftest import NOW, World, throttled_error


def _signed_up(client: TestClient, user: str) -> str:
    answer = client.post(f"/{user}/signup")
    assert answer.status_code == 201
    return str(answer.json()["arrayAccountId"])


def _plant_row(world: World, user: str, account: str) -> None:
    """The account's row written behind the service's back (by a request that beat it)."""
    world.dynamodb.put_item(TableName=world.table_name, Item=entitlement_row(user, account, now=NOW))


# -- unknown users ----------------------------------------------------------------------------------


def test_reactivation_of_an_unknown_user_is_a_404(world: World) -> None:
    with world.client() as client:
        answer = client.post("/nobody/reactivation")
    assert answer.status_code == 404
    assert answer.json() == {"error": "unknown_user", "message": "the user has no entitlement row"}


def test_second_signup_of_an_unknown_user_is_a_404_before_array_is_asked(world: World) -> None:
    with world.client() as client:
        answer = client.post("/nobody/array-signup")
    assert answer.status_code == 404
    assert answer.json()["error"] == "unknown_user"
    assert world.fake.calls["create_user"] == 0


# -- transaction races ------------------------------------------------------------------------------


def test_the_second_of_two_racing_cancellations_is_a_409_and_the_first_stands(world: World) -> None:
    """Both read the Active row; the one whose transaction lands second finds it Cancelled: refused."""
    with world.client() as client:
        account = _signed_up(client, "u-1")
        first: list[str] = []  # the other request, landing between this one's read and its write
        world.counting.before_transact = lambda: first.append(world.parts.service.cancel("u-1"))
        second = client.post("/u-1/cancellation")
    assert first == [account]
    assert second.status_code == 409
    assert second.json()["error"] == "not_active"
    assert world.status("u-1", account) == "Cancelled"
    assert world.item("USER#u-1", "CLEANUP#CANCELLATION") is not None


def test_a_second_signup_whose_new_row_appeared_before_its_transaction_is_a_409_writing_nothing(
    world: World,
) -> None:
    """The transaction's first condition (the new account's row does not exist) refuses it: the old
    row is not retired and no stale record is written."""
    with world.client() as client:
        old = _signed_up(client, "u-1")
        world.counting.before_transact = lambda: _plant_row(world, "u-1", world.fake.accounts["u-1"][-1])
        answer = client.post("/u-1/array-signup")
    assert answer.status_code == 409
    assert answer.json()["error"] == "account_held_before"
    assert world.status("u-1", old) == "Active"
    assert world.item("USER#u-1", f"CLEANUP#STALE#{old}") is None
    assert world.recorded() == []


def test_a_signup_losing_to_one_answered_the_same_account_answers_it_and_schedules_nothing(
    world: World,
) -> None:
    """Array answered both concurrent signups with one account: the loser's account is the user's, so
    it is answered as the Active row it asked for (201) and never put on a stale key."""
    world.fake.same_account = True
    with world.client() as client:
        first: list[str] = []  # the other signup, landing between this one's read and its write
        world.counting.before_transact = lambda: first.append(
            world.parts.service.signup("u-1").array_account_id
        )
        answer = client.post("/u-1/signup")
    assert answer.status_code == 201
    assert answer.json() == {"arrayAccountId": first[0], "status": "Active", "written": True}
    assert world.status("u-1", first[0]) == "Active"
    assert world.item("USER#u-1", f"CLEANUP#STALE#{first[0]}") is None


def test_a_signup_losing_to_a_concurrent_signup_is_a_409_and_schedules_its_own_account_stale(
    world: World,
) -> None:
    with world.client() as client:
        first: list[str] = []
        world.counting.before_transact = lambda: first.append(
            world.parts.service.signup("u-1").array_account_id
        )
        answer = client.post("/u-1/signup")
    assert answer.status_code == 409
    assert answer.json()["error"] == "concurrent_request"
    winner, loser = first[0], world.fake.accounts["u-1"][0]
    assert winner != loser
    assert world.status("u-1", winner) == "Active"
    assert world.status("u-1", loser) == "Superseded"  # never Active: cleanup marks it Removed
    assert world.item("USER#u-1", f"CLEANUP#STALE#{loser}") is not None
    assert [(o.kind, o.array_account_id) for o in world.recorded()] == [(OutcomeKind.SIGNUP_RACE_LOST, loser)]


def test_a_second_signup_whose_transaction_landed_unanswered_answers_it_written_on_the_retry(
    world: World,
) -> None:
    """The first attempt commits but its answer is lost (a throttle reported after the write); the retry
    is refused by the guard the first attempt moved: the request answers its own write, 201."""
    with world.client() as client:
        old = _signed_up(client, "u-1")
        inner = world.counting.transact_write_items

        def landed_unanswered(**kwargs: object) -> dict[str, object]:
            world.counting.transact_write_items = inner  # type: ignore[method-assign]
            inner(**kwargs)
            raise throttled_error("TransactWriteItems")

        world.counting.transact_write_items = landed_unanswered  # type: ignore[method-assign]
        answer = client.post("/u-1/array-signup")
    assert answer.status_code == 201
    new = answer.json()["arrayAccountId"]
    assert answer.json()["retired"] is True
    assert (world.status("u-1", new), world.status("u-1", old)) == ("Active", "Superseded")
    assert world.item("USER#u-1", f"CLEANUP#STALE#{new}") is None


@pytest.mark.parametrize("route", ["cancellation", "reactivation"])
def test_a_cancellation_or_reactivation_whose_transaction_landed_unanswered_answers_200(
    world: World, route: str
) -> None:
    """The retry is refused by the guard the first attempt moved; reading the guard back, the request
    finds its own write (the guard's lastWrite) and answers it, instead of a 409 for a change it made."""
    with world.client() as client:
        account = _signed_up(client, "u-1")
        if route == "reactivation":
            assert client.post("/u-1/cancellation").status_code == 200
        inner = world.counting.transact_write_items

        def landed_unanswered(**kwargs: object) -> dict[str, object]:
            world.counting.transact_write_items = inner  # type: ignore[method-assign]
            inner(**kwargs)
            raise throttled_error("TransactWriteItems")

        world.counting.transact_write_items = landed_unanswered  # type: ignore[method-assign]
        answer = client.post(f"/u-1/{route}")
    assert answer.status_code == 200
    assert world.status("u-1", account) == ("Cancelled" if route == "cancellation" else "Active")


# -- downstream services unavailable (503, safe to retry) -------------------------------------------


def test_signup_answers_503_array_unavailable_when_array_keeps_failing(world: World) -> None:
    world.fake.create_statuses = [503, 503, 503]
    with world.client() as client:
        answer = client.post("/u-1/signup")
    assert answer.status_code == 503
    assert answer.json()["error"] == "array_unavailable"
    assert answer.headers["retry-after"] == "1"
    assert world.counting.writes == 0


def test_second_signup_answers_503_array_unavailable_when_array_keeps_failing(world: World) -> None:
    with world.client() as client:
        old = _signed_up(client, "u-1")
        world.fake.create_statuses = [503, 503, 503]
        answer = client.post("/u-1/array-signup")
    assert answer.status_code == 503
    assert answer.json()["error"] == "array_unavailable"
    assert world.status("u-1", old) == "Active"


def test_signup_answers_503_table_unavailable_when_its_read_keeps_being_throttled(world: World) -> None:
    world.counting.fail_queries = 3  # every attempt of the user's read
    with world.client() as client:
        answer = client.post("/u-1/signup")
    assert answer.status_code == 503
    assert answer.json()["error"] == "table_unavailable"
    assert world.fake.calls["create_user"] == 0


def test_second_signup_answers_503_table_unavailable_when_its_transaction_keeps_being_throttled(
    world: World,
) -> None:
    with world.client() as client:
        old = _signed_up(client, "u-1")
        world.counting.fail_transacts = 3  # every attempt of the transaction
        answer = client.post("/u-1/array-signup")
    assert answer.status_code == 503
    assert answer.json()["error"] == "table_unavailable"
    assert world.status("u-1", old) == "Active"
    assert world.item("USER#u-1", f"CLEANUP#STALE#{old}") is None


# -- downstream refusals and answers the service cannot use (502) -----------------------------------


def test_processor_answers_502_array_user_unknown_when_array_does_not_know_the_account(
    world: World,
) -> None:
    world.fake.token_statuses = [404]
    with world.client() as client:
        _signed_up(client, "u-1")
        answer = client.post("/u-1/processor")
    assert answer.status_code == 502
    assert answer.json()["error"] == "array_user_unknown"
    assert [(o.kind, o.detail) for o in world.recorded()] == [(OutcomeKind.LINK_FAILED, "array_user_unknown")]


def test_processor_answers_502_transactions_refused_when_transactions_service_refuses(
    world: World,
) -> None:
    world.fake.transactions_statuses = [400]
    with world.client() as client:
        _signed_up(client, "u-1")
        answer = client.post("/u-1/processor")
    assert answer.status_code == 502
    assert answer.json()["error"] == "transactions_refused"
    assert world.fake.calls["primary_account"] == 1  # a refusal is not retried
    assert world.fake.calls["processor_token"] == 0


def test_processor_answers_502_transactions_bad_answer_for_a_primary_account_without_a_token(
    world: World,
) -> None:
    world.fake.transactions_statuses = [200]  # a 200 with an empty body
    with world.client() as client:
        _signed_up(client, "u-1")
        answer = client.post("/u-1/processor")
    assert answer.status_code == 502
    assert answer.json()["error"] == "transactions_bad_answer"
    assert world.fake.calls["processor_token"] == 0


def test_signup_answers_502_array_bad_answer_for_a_created_user_without_an_id(world: World) -> None:
    world.fake.create_statuses = [201]  # a 201 with an empty body
    with world.client() as client:
        answer = client.post("/u-1/signup")
    assert answer.status_code == 502
    assert answer.json()["error"] == "array_bad_answer"
    assert world.counting.writes == 0


def test_processor_answers_502_array_refused_when_array_refuses_the_token(world: World) -> None:
    world.fake.token_statuses = [400]
    with world.client() as client:
        _signed_up(client, "u-1")
        answer = client.post("/u-1/processor")
    assert (answer.status_code, answer.json()["error"]) == (502, "array_refused")
    assert world.fake.calls["processor_token"] == 1  # a refusal is not retried


def test_processor_answers_502_transactions_credentials_when_transactions_service_says_401(
    world: World,
) -> None:
    world.fake.transactions_statuses = [401]
    with world.client() as client:
        _signed_up(client, "u-1")
        answer = client.post("/u-1/processor")
    assert (answer.status_code, answer.json()["error"]) == (502, "transactions_credentials")
    assert world.fake.calls["processor_token"] == 0
