"""service/idempotency.py through the routes: an Idempotency-Key makes a retried request return the first
answer, never a second effect; a key names one request."""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.service.conftest import World

KEY = {"Idempotency-Key": "k-7f3a9c"}


def _signed_up(client: TestClient, user: str) -> str:
    answer = client.post(f"/{user}/signup")
    assert answer.status_code == 201
    return str(answer.json()["arrayAccountId"])


def test_a_retried_signup_with_its_key_returns_the_first_answer_and_creates_one_array_account(
    world: World,
) -> None:
    with world.client() as client:
        first = client.post("/u-1/signup", headers=KEY)
        retried = client.post("/u-1/signup", headers=KEY)
    assert (first.status_code, retried.status_code) == (201, 201)
    assert retried.json() == first.json()
    assert retried.headers["idempotent-replayed"] == "true"
    assert world.fake.calls["create_user"] == 1


def test_a_retried_second_signup_with_its_key_supersedes_once(world: World) -> None:
    with world.client() as client:
        _signed_up(client, "u-1")
        first = client.post("/u-1/array-signup", headers=KEY)
        retried = client.post("/u-1/array-signup", headers=KEY)
    assert retried.json() == first.json()
    assert world.fake.calls["create_user"] == 2  # the signup's and the one second signup's


def test_a_key_sent_again_with_another_route_is_a_422_doing_nothing(world: World) -> None:
    with world.client() as client:
        account = _signed_up(client, "u-1")
        assert client.post("/u-1/processor", headers=KEY).status_code == 200
        reused = client.post("/u-1/cancellation", headers=KEY)
    assert reused.status_code == 422
    assert reused.json()["error"] == "idempotency_key_reused"
    assert world.status("u-1", account) == "Active"


def test_a_key_whose_first_request_is_in_flight_is_a_409_concurrent_request(world: World) -> None:
    answers: list[tuple[int, str]] = []
    with world.client() as client:

        def meanwhile() -> None:  # the retry arrives while the first is at Array
            world.fake.before_create_user = None
            again = client.post("/u-1/signup", headers=KEY)
            answers.append((again.status_code, again.json()["error"]))

        world.fake.before_create_user = meanwhile
        first = client.post("/u-1/signup", headers=KEY)
    assert first.status_code == 201
    assert answers == [(409, "concurrent_request")]
    assert world.fake.calls["create_user"] == 1


def test_a_first_request_failing_transiently_releases_its_key_and_the_retry_runs(world: World) -> None:
    world.counting.fail_transacts = 3  # every attempt of the first request's write
    with world.client() as client:
        failed = client.post("/u-1/signup", headers=KEY)
        retried = client.post("/u-1/signup", headers=KEY)
    assert failed.status_code == 503
    assert retried.status_code == 201
    assert "idempotent-replayed" not in retried.headers
    assert world.status("u-1", retried.json()["arrayAccountId"]) == "Active"


def test_a_refusal_is_the_first_answer_too(world: World) -> None:
    with world.client() as client:
        refused = client.post("/u-1/cancellation", headers=KEY)  # no such user yet
        _signed_up(client, "u-1")
        retried = client.post("/u-1/cancellation", headers=KEY)
    assert (refused.status_code, retried.status_code) == (404, 404)
    assert retried.json() == refused.json()


def test_a_key_that_is_not_1_to_255_visible_characters_is_a_422_validation(world: World) -> None:
    with world.client() as client:
        spaced = client.post("/u-1/signup", headers={"Idempotency-Key": "has space"})
        long = client.post("/u-1/signup", headers={"Idempotency-Key": "k" * 256})
    assert [spaced.status_code, long.status_code] == [422, 422]
    assert spaced.json()["error"] == "validation"
    assert world.fake.calls["create_user"] == 0


def test_the_key_is_stored_as_a_digest_in_the_users_partition_never_in_clear(world: World) -> None:
    with world.client() as client:
        client.post("/u-1/signup", headers=KEY)
    items = world.dynamodb.query(
        TableName=world.table_name,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": "USER#u-1"}},
    )["Items"]
    records = [i for i in items if i["sk"]["S"].startswith("IDEMPOTENCY#")]
    assert len(records) == 1
    assert KEY["Idempotency-Key"] not in str(records)
    assert int(records[0]["responseStatus"]["N"]) == 201
