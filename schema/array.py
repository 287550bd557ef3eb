"""The Array delete-user call as we use it: the one statement of its wire contract.

Array's public docs are behind a login; this is the shape the client (`processors.cleanup`'s
`HttpArrayClient`) sends and the fake Array (`devstack.fake_array`) serves:

    DELETE /api/user/v2                (or POST with `x-http-method: DELETE`)
    x-array-server-token: <server token>
    content-type: application/json
    {"appKey": "<app key>", "userId": "<the Array user id = our arrayAccountId>"}

2xx: deleted. 404: already gone. 401/403: credentials. 429 (with an optional numeric Retry-After) and
5xx: transient. Any other status: the request itself is refused.
"""

from __future__ import annotations

__all__ = [
    "APP_KEY_FIELD",
    "DELETE_METHOD",
    "DELETE_USER_PATH",
    "METHOD_OVERRIDE_HEADER",
    "RETRY_AFTER_HEADER",
    "SERVER_TOKEN_HEADER",
    "USER_ID_FIELD",
    "delete_user_body",
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
