"""schema/array.py: the Array delete-user wire contract, shared by the client and the fake."""

from __future__ import annotations

import httpx

from devstack.fake_array import DEFAULT_APP_KEY, DEFAULT_SERVER_TOKEN, FakeArrayServer
from schema import array


def test_the_body_names_the_app_key_and_the_user() -> None:
    assert array.delete_user_body("key", "acct-1") == {"appKey": "key", "userId": "acct-1"}


def test_a_call_built_from_the_contract_alone_deletes_at_the_fake() -> None:
    with FakeArrayServer() as fake:
        fake.add_users(["acct-1"])
        response = httpx.request(
            array.DELETE_METHOD,
            fake.url + array.DELETE_USER_PATH,
            headers={array.SERVER_TOKEN_HEADER: DEFAULT_SERVER_TOKEN},
            json=array.delete_user_body(DEFAULT_APP_KEY, "acct-1"),
        )
        assert (response.status_code, fake.has_user("acct-1")) == (200, False)


def test_the_method_override_header_is_honoured_by_the_fake() -> None:
    with FakeArrayServer() as fake:
        fake.add_users(["acct-1"])
        response = httpx.post(
            fake.url + array.DELETE_USER_PATH,
            headers={
                array.SERVER_TOKEN_HEADER: DEFAULT_SERVER_TOKEN,
                array.METHOD_OVERRIDE_HEADER: array.DELETE_METHOD,
            },
            json=array.delete_user_body(DEFAULT_APP_KEY, "acct-1"),
        )
        assert response.status_code == 200
