"""The service's routes (service/app.py, service/writes.py): each write as the seed and docs/table.md
state it, and a clear JSON refusal for everything else."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest
from fastapi.testclient import TestClient

from schema.outcomes import OutcomeKind
from service.app import create_app
from tests.service.conftest import CANARY, NOW, World


def _signed_up(client: TestClient, user: str) -> str:
    answer = client.post(f"/{user}/signup")
    assert answer.status_code == 201
    return str(answer.json()["arrayAccountId"])


def test_signup_creates_the_user_at_array_and_puts_a_fresh_active_row(world: World) -> None:
    with world.client() as client:
        answer = client.post("/u-1/signup")
    assert answer.status_code == 201
    account = answer.json()["arrayAccountId"]
    assert world.fake.accounts == {"u-1": [account]}
    row = world.item("USER#u-1", f"ENTITLEMENT#{account}")
    assert row is not None
    assert row["status"]["S"] == "Active"
    assert row["gsi1pk"]["S"] == f"ARRAY#{account}"
    assert "ttl" not in row


def test_a_signup_whose_write_fails_answers_503_and_its_retry_signs_the_user_up(world: World) -> None:
    world.counting.fail_transacts = 3  # every attempt of the first request
    with world.client() as client:
        failed = client.post("/u-1/signup")
        retried = client.post("/u-1/signup")
    assert failed.status_code == 503
    assert failed.json()["error"] == "signup_not_written"
    assert failed.headers["retry-after"] == "1"
    assert retried.status_code == 201
    assert world.status("u-1", retried.json()["arrayAccountId"]) == "Active"


def test_a_signup_repeated_after_it_landed_answers_the_account_and_writes_nothing(world: World) -> None:
    with world.client() as client:
        account = _signed_up(client, "u-1")
        writes = world.counting.writes
        again = client.post("/u-1/signup")
    assert again.status_code == 200
    assert again.json() == {"arrayAccountId": account, "status": "Active", "written": False}
    assert world.counting.writes == writes
    assert world.fake.calls["create_user"] == 1


def test_cancellation_cancels_the_row_and_schedules_cleanup_on_the_single_cancellation_key(
    world: World,
) -> None:
    with world.client() as client:
        account = _signed_up(client, "u-1")
        answer = client.post("/u-1/cancellation")
    assert answer.status_code == 200
    assert world.status("u-1", account) == "Cancelled"
    record = world.item("USER#u-1", "CLEANUP#CANCELLATION")
    assert record is not None
    assert record["arrayAccountId"]["S"] == account
    assert int(record["ttl"]["N"]) == int((NOW + timedelta(days=63)).timestamp())


def test_cancellation_of_an_unknown_user_is_a_404_json_refusal(world: World) -> None:
    with world.client() as client:
        answer = client.post("/nobody/cancellation")
    assert answer.status_code == 404
    assert answer.json() == {"error": "unknown_user", "message": "the user has no entitlement row"}


def test_cancellation_of_a_user_holding_no_active_row_is_a_409(world: World) -> None:
    with world.client() as client:
        _signed_up(client, "u-1")
        client.post("/u-1/cancellation")
        again = client.post("/u-1/cancellation")
    assert again.status_code == 409
    assert again.json()["error"] == "not_active"


def test_reactivation_deletes_the_cancellation_record_and_makes_the_row_active(world: World) -> None:
    with world.client() as client:
        account = _signed_up(client, "u-1")
        client.post("/u-1/cancellation")
        answer = client.post("/u-1/reactivation")
    assert answer.status_code == 200
    assert world.status("u-1", account) == "Active"
    assert world.item("USER#u-1", "CLEANUP#CANCELLATION") is None


def test_reactivation_without_a_cancellation_record_is_a_409(world: World) -> None:
    with world.client() as client:
        account = _signed_up(client, "u-1")
        client.post("/u-1/cancellation")
        world.dynamodb.delete_item(  # the record expired: cleanup owns the account now
            TableName=world.table_name, Key={"pk": {"S": "USER#u-1"}, "sk": {"S": "CLEANUP#CANCELLATION"}}
        )
        answer = client.post("/u-1/reactivation")
    assert answer.status_code == 409
    assert answer.json()["error"] == "no_cancellation"
    assert world.status("u-1", account) == "Cancelled"


def test_a_reactivation_whose_cancellation_record_expires_before_its_write_is_a_409_writing_nothing(
    world: World,
) -> None:
    """The race the transaction's conditions close: the service read the record, then TTL removed it
    (cleanup owns the account now) before the reactivation's write: refused, the row stays Cancelled."""
    cancellation = {"pk": {"S": "USER#u-1"}, "sk": {"S": "CLEANUP#CANCELLATION"}}
    with world.client() as client:
        account = _signed_up(client, "u-1")
        client.post("/u-1/cancellation")
        row_before = world.item("USER#u-1", f"ENTITLEMENT#{account}")
        world.counting.before_transact = lambda: world.dynamodb.delete_item(
            TableName=world.table_name, Key=cancellation
        )
        answer = client.post("/u-1/reactivation")
    assert answer.status_code == 409
    assert answer.json()["error"] == "not_cancelled"
    assert world.item("USER#u-1", f"ENTITLEMENT#{account}") == row_before
    assert world.item("USER#u-1", "CLEANUP#CANCELLATION") is None


def test_the_second_of_two_racing_reactivations_is_a_409_and_the_first_stands(world: World) -> None:
    """Both read the same guard version; the one whose transaction lands second is refused by the guard,
    reads again and finds the user Active."""
    with world.client() as client:
        account = _signed_up(client, "u-1")
        client.post("/u-1/cancellation")
        first: list[str] = []  # the other request, landing between this one's read and its write
        world.counting.before_transact = lambda: first.append(world.parts.service.reactivate("u-1"))
        second = client.post("/u-1/reactivation")
    assert first == [account]
    assert second.status_code == 409
    assert second.json()["error"] == "already_active"
    assert world.status("u-1", account) == "Active"
    assert world.item("USER#u-1", "CLEANUP#CANCELLATION") is None


def test_reactivation_of_an_active_user_is_a_409(world: World) -> None:
    with world.client() as client:
        _signed_up(client, "u-1")
        answer = client.post("/u-1/reactivation")
    assert answer.status_code == 409
    assert answer.json()["error"] == "already_active"


def test_second_signup_writes_the_new_row_retires_the_old_and_schedules_the_old_account(
    world: World,
) -> None:
    with world.client() as client:
        old = _signed_up(client, "u-1")
        answer = client.post("/u-1/array-signup")
    assert answer.status_code == 201
    new = answer.json()["arrayAccountId"]
    assert answer.json()["retired"] is True
    assert world.status("u-1", new) == "Active"
    assert world.status("u-1", old) == "Superseded"
    stale = world.item("USER#u-1", f"CLEANUP#STALE#{old}")
    assert stale is not None
    assert stale["arrayAccountId"]["S"] == old
    assert int(stale["ttl"]["N"]) == int((NOW + timedelta(days=1)).timestamp())


def test_second_signup_answered_with_the_account_already_held_returns_at_once_and_writes_nothing(
    world: World,
) -> None:
    world.fake.same_account = True
    with world.client() as client:
        account = _signed_up(client, "u-1")
        writes = world.counting.writes
        answer = client.post("/u-1/array-signup")
    assert answer.status_code == 200
    assert answer.json() == {
        "arrayAccountId": account,
        "status": "Active",
        "written": False,
        "retired": False,
    }
    assert world.counting.writes == writes
    assert world.status("u-1", account) == "Active"
    assert world.item("USER#u-1", f"CLEANUP#STALE#{account}") is None


def test_a_second_signup_losing_to_a_cancellation_is_a_409_and_schedules_its_new_account_stale(
    world: World,
) -> None:
    with world.client() as client:
        old = _signed_up(client, "u-1")
        # A cancellation lands while Array is creating the second account: the guard refuses the write.
        world.fake.before_create_user = lambda: client.post("/u-1/cancellation") and None
        answer = client.post("/u-1/array-signup")
    assert answer.status_code == 409
    assert answer.json()["error"] == "concurrent_request"
    new = world.fake.accounts["u-1"][-1]
    assert world.status("u-1", new) == "Superseded"  # never a second Active row; cleanup marks it Removed
    assert world.status("u-1", old) == "Cancelled"  # its cancellation record still schedules it
    assert world.item("USER#u-1", "CLEANUP#CANCELLATION") is not None
    stale = world.item("USER#u-1", f"CLEANUP#STALE#{new}")
    assert stale is not None
    assert int(stale["ttl"]["N"]) == int((NOW + timedelta(days=1)).timestamp())
    assert [(o.kind, o.array_account_id, o.detail) for o in world.recorded()] == [
        (OutcomeKind.SIGNUP_RACE_LOST, new, "second_signup:scheduled_stale")
    ]


def test_processor_links_the_primary_account_and_puts_back_the_row_unchanged(world: World) -> None:
    with world.client() as client:
        account = _signed_up(client, "u-1")
        before = world.item("USER#u-1", f"ENTITLEMENT#{account}")
        answer = client.post("/u-1/processor")
    assert answer.status_code == 200
    assert answer.json() == {"arrayAccountId": account, "status": "linked"}
    assert world.fake.tokens_received == [(account, world.fake.token)]
    assert world.item("USER#u-1", f"ENTITLEMENT#{account}") == before
    assert [o.kind for o in world.recorded()] == [OutcomeKind.LINK_LINKED]


def test_processor_answers_404_when_save_if_active_refuses_a_row_retired_mid_link(world: World) -> None:
    with world.client() as client:
        old = _signed_up(client, "u-1")
        world.fake.before_processor_token = lambda: client.post("/u-1/array-signup") and None
        answer = client.post("/u-1/processor")
    assert answer.status_code == 404
    assert answer.json()["error"] == "entitlement_not_active"
    assert world.status("u-1", old) == "Superseded"  # not returned to Active
    refused = [o for o in world.recorded() if o.kind is OutcomeKind.LINK_NOT_ACTIVE]
    assert [(o.array_account_id, o.detail) for o in refused] == [(old, "save_refused")]


def test_processor_answers_503_when_transactions_service_keeps_failing(world: World) -> None:
    world.fake.transactions_statuses = [503, 503, 503]
    with world.client() as client:
        _signed_up(client, "u-1")
        answer = client.post("/u-1/processor")
    assert answer.status_code == 503
    assert answer.json()["error"] == "transactions_unavailable"
    assert world.fake.calls["primary_account"] == 3
    assert [(o.kind, o.detail) for o in world.recorded()] == [
        (OutcomeKind.LINK_FAILED, "transactions_unavailable")
    ]


def test_processor_for_a_user_with_no_primary_account_is_a_409(world: World) -> None:
    world.fake.transactions_statuses = [404]
    with world.client() as client:
        _signed_up(client, "u-1")
        answer = client.post("/u-1/processor")
    assert answer.status_code == 409
    assert answer.json()["error"] == "no_primary_account"
    assert world.fake.calls["processor_token"] == 0


def test_array_refusing_create_user_is_a_502_and_writes_nothing(world: World) -> None:
    world.fake.create_statuses = [403]
    with world.client() as client:
        answer = client.post("/u-1/signup")
    assert answer.status_code == 502
    assert answer.json()["error"] == "array_credentials"
    assert world.counting.writes == 0


def test_an_invalid_user_id_is_a_422_naming_the_field_never_the_value(world: World) -> None:
    with world.client() as client:
        answer = client.post("/bad%20id%21/signup")
    assert answer.status_code == 422
    assert answer.json()["error"] == "validation"
    assert "bad" not in answer.text
    assert "user_id" in answer.json()["message"]


def test_the_openapi_page_lists_every_route(world: World) -> None:
    with world.client() as client:
        paths = client.get("/openapi.json").json()["paths"]
        docs = client.get("/docs")
    assert docs.status_code == 200
    assert {
        "/{user_id}/signup",
        "/{user_id}/cancellation",
        "/{user_id}/reactivation",
        "/{user_id}/array-signup",
        "/{user_id}/processor",
    } <= set(paths)


def test_signup_of_a_user_whose_rows_are_all_inactive_is_a_409(world: World) -> None:
    with world.client() as client:
        _signed_up(client, "u-1")
        client.post("/u-1/cancellation")
        answer = client.post("/u-1/signup")
    assert answer.status_code == 409
    assert answer.json()["error"] == "signed_up_before"
    assert world.fake.calls["create_user"] == 1


def test_second_signup_of_a_user_holding_no_active_row_is_a_409_before_array_is_asked(world: World) -> None:
    with world.client() as client:
        _signed_up(client, "u-1")
        client.post("/u-1/cancellation")
        answer = client.post("/u-1/array-signup")
    assert answer.status_code == 409
    assert answer.json()["error"] == "not_active"
    assert world.fake.calls["create_user"] == 1


def test_second_signup_answered_with_an_account_the_user_held_before_is_refused_and_writes_nothing(
    world: World,
) -> None:
    with world.client() as client:
        first = _signed_up(client, "u-1")
        client.post("/u-1/array-signup")
        world.fake.same_account = True
        world.fake.accounts["u-1"].append(first)  # Array answers the superseded account again
        writes = world.counting.writes
        answer = client.post("/u-1/array-signup")
    assert answer.status_code == 409
    assert answer.json()["error"] == "account_held_before"
    assert world.counting.writes == writes
    assert world.status("u-1", first) == "Superseded"


def test_processor_for_an_unknown_user_is_a_404(world: World) -> None:
    with world.client() as client:
        answer = client.post("/nobody/processor")
    assert answer.status_code == 404
    assert answer.json()["error"] == "unknown_user"
    assert world.fake.calls["primary_account"] == 0


def test_no_answer_of_the_processor_route_and_no_log_line_holds_the_processor_token(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    answers = []
    with world.client() as client:
        _signed_up(client, "u-1")
        for statuses in ([], [400], [503, 503, 503], [401]):
            world.fake.token_statuses = list(statuses)
            answers.append(client.post("/u-1/processor"))
    assert [a.status_code for a in answers] == [200, 502, 503, 502]
    assert all(CANARY not in a.text for a in answers)
    assert CANARY not in caplog.text
    assert all(CANARY not in o.model_dump_json() for o in world.sink.outcomes)


def test_stats_count_the_links_save_if_active_refused(world: World) -> None:
    with world.client() as client:
        _signed_up(client, "u-1")
        world.fake.before_processor_token = lambda: client.post("/u-1/array-signup") and None
        client.post("/u-1/processor")
        stats = client.get("/stats").json()
    assert stats["outcome_details"] == {
        "link.not_active:save_refused": 1,
        "array.account_created:signup": 1,
        "array.account_created:second_signup": 1,
    }
    assert stats["outcomes"] == {"link.not_active": 1, "array.account_created": 2}
    assert stats["requests"] == {"signup": 1, "second_signup": 1}


def test_an_unexpected_failure_is_a_500_json_body_naming_nothing(world: World) -> None:
    def broken(user_id: str) -> str:
        raise KeyError(user_id)

    world.parts.service.cancel = broken  # type: ignore[method-assign]
    with TestClient(create_app(world.parts), raise_server_exceptions=False) as client:
        answer = client.post("/u-secret/cancellation")
    assert answer.status_code == 500
    assert answer.json() == {"error": "internal", "message": "the request failed"}
    assert "u-secret" not in answer.text
