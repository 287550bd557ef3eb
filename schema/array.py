"""The Array delete-user call as we use it: the one statement of its wire contract.

Array's public docs are behind a login; this is the shape the client (`processors.cleanup`'s
`HttpArrayClient`) sends and the fake Array (`devstack.fake_array`) serves:

    DELETE /api/user/v2                (or POST with `x-http-method: DELETE`)
    x-array-server-token: <server token>
    content-type: application/json
    {"appKey": "<app key>", "userId": "<the Array user id = our arrayAccountId>"}

2xx: deleted. 404: already gone. 401/403: credentials. 429 (with an optional numeric Retry-After) and
5xx: transient. Any other status: the request itself is refused.

The service's calls (`service.clients`, served by the fakes in `devstack/`):

    create-user (signup, second Array signup)
    POST /api/user/v2                  (no method override: the override header makes it a delete)
    x-array-server-token: <server token>
    {"appKey": "<app key>", "clientKey": "<our userId>"}
    -> 200/201 {"userId": "<the Array user id>"}: a new account, or the one the user already holds

    processor-token (arraylink)
    POST /api/user/v2/processor-token
    x-array-server-token: <server token>
    {"appKey": "<app key>", "userId": "<Array user id>", "processorToken": "<secret>"}
    -> 2xx linked; 404 unknown Array user; 401/403 credentials; 429/5xx transient; other: refused

    transactions-service: the user's primary account (arraylink)
    GET /users/<our userId>/primary-account
    -> 200 {"accountId": "<account id>", "processorToken": "<secret>"}; 404 no primary account;
       429/5xx transient; other: refused
"""

from __future__ import annotations

from urllib.parse import quote

__all__ = [
    "ACCOUNT_ID_FIELD",
    "APP_KEY_FIELD",
    "CLIENT_KEY_FIELD",
    "CREATE_USER_METHOD",
    "CREATE_USER_PATH",
    "DELETE_METHOD",
    "DELETE_USER_PATH",
    "METHOD_OVERRIDE_HEADER",
    "PRIMARY_ACCOUNT_METHOD",
    "PROCESSOR_TOKEN_FIELD",
    "PROCESSOR_TOKEN_METHOD",
    "PROCESSOR_TOKEN_PATH",
    "RETRY_AFTER_HEADER",
    "SERVER_TOKEN_HEADER",
    "USER_ID_FIELD",
    "create_user_body",
    "delete_user_body",
    "primary_account_path",
    "processor_token_body",
]

DELETE_USER_PATH = "/api/user/v2"
DELETE_METHOD = "DELETE"
SERVER_TOKEN_HEADER = "x-array-server-token"  # noqa: S105 (a header name, not a secret)
METHOD_OVERRIDE_HEADER = "x-http-method"
RETRY_AFTER_HEADER = "retry-after"
APP_KEY_FIELD = "appKey"
USER_ID_FIELD = "userId"


def delete_user_body(app_key: str, array_user_id: str) -> dict[str, str]:
    """The JSON body of a delete-user call."""
    return {APP_KEY_FIELD: app_key, USER_ID_FIELD: array_user_id}


# -- the service's calls ----------------------------------------------------------------------------------

CREATE_USER_PATH = "/api/user/v2"
CREATE_USER_METHOD = "POST"
CLIENT_KEY_FIELD = "clientKey"  # our user id, as Array holds it
PROCESSOR_TOKEN_PATH = "/api/user/v2/processor-token"  # noqa: S105 (a path, not a secret)
PROCESSOR_TOKEN_METHOD = "POST"  # noqa: S105 (a method, not a secret)
PROCESSOR_TOKEN_FIELD = "processorToken"  # noqa: S105 (a field name, not a secret)
PRIMARY_ACCOUNT_METHOD = "GET"
ACCOUNT_ID_FIELD = "accountId"


def create_user_body(app_key: str, user_id: str) -> dict[str, str]:
    """The JSON body of a create-user call (our user id is Array's client key)."""
    return {APP_KEY_FIELD: app_key, CLIENT_KEY_FIELD: user_id}


def processor_token_body(app_key: str, array_user_id: str, processor_token: str) -> dict[str, str]:
    """The JSON body of a processor-token call. It holds a secret: never log it."""
    return {APP_KEY_FIELD: app_key, USER_ID_FIELD: array_user_id, PROCESSOR_TOKEN_FIELD: processor_token}


def primary_account_path(user_id: str) -> str:
    """transactions-service's path for the user's primary account (the id is percent-encoded)."""
    return f"/users/{quote(user_id, safe='')}/primary-account"
