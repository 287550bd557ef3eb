"""The JSON Schema and the strict models agree beyond the corpus too: generated times, numbers and keys."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from schema.erasure._models import message_adapter
from schema.erasure._schema import MESSAGE_VALIDATOR

BASE = {
    "type": "erasure/ERASE",
    "requestId": "req-1",
    "sendNo": 1,
    "expiresAt": "2099-01-01T00:00:00.000Z",
    "keyKind": "ACCOUNT",
    "key": "acct-1",
}
TIME_LIKE = st.from_regex(
    r"\A[0-9+\-]{4,6}-[0-9]{1,3}-[0-9]{1,3}[Tt ][0-9]{1,2}:[0-9]{2}(:[0-9]{2})?(\.[0-9]{0,12})?"
    r"(Z|z|[+\-][0-9]{2}:?[0-9]{2})?\n?\Z"
)
PLAUSIBLE_TIME = st.datetimes().map(lambda d: d.strftime("%Y-%m-%dT%H:%M:%S") + ".000Z")
JSON_SCALAR = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False, allow_infinity=True), st.text()
)


def _agree(message: dict[str, Any]) -> None:
    by_schema = MESSAGE_VALIDATOR.is_valid(message)
    try:
        message_adapter().validate_python(message, by_alias=True, by_name=False)
        by_models = True
    except ValidationError:
        by_models = False
    assert by_schema == by_models, message


@settings(max_examples=400)
@given(st.one_of(TIME_LIKE, PLAUSIBLE_TIME, st.text(max_size=40)))
@example("2099-02-29T00:00:00Z")
@example("2096-02-29T00:00:00Z")
@example("0000-01-01T00:00:00Z")
@example("2099-01-01T00:00:00Z\n")
def test_they_agree_on_times(expires_at: str) -> None:
    _agree({**BASE, "expiresAt": expires_at})


@settings(max_examples=300)
@given(
    st.one_of(
        JSON_SCALAR,
        st.integers(min_value=-3, max_value=2**31 + 3),
        st.sampled_from([1.0, 2.0**31 - 1, 2.0**31, 1e300, -0.0]),
    )
)
def test_they_agree_on_send_no(send_no: object) -> None:
    _agree({**BASE, "sendNo": send_no})


@settings(max_examples=300)
@given(st.sampled_from(["ACCOUNT", "ADDRESS", "address", "EMAIL"]), JSON_SCALAR)
def test_they_agree_on_keys(key_kind: str, key: object) -> None:
    _agree({**BASE, "keyKind": key_kind, "key": key})


@settings(max_examples=300)
@given(st.dictionaries(st.sampled_from([*BASE, "from", "to", "subscriber", "outcome", "x"]), JSON_SCALAR))
def test_they_agree_on_any_mix_of_fields(changes: dict[str, object]) -> None:
    _agree({**BASE, **changes})


WITH_SURROGATES = st.text(
    alphabet=st.sampled_from(["a", "A", "@", "\u212a", "\U0001f600", "\ud800", "\udbff", "\udc00", "\udfff"]),
    max_size=8,
)


@settings(max_examples=300)
@given(st.sampled_from(["requestId", "key"]), st.sampled_from(["ACCOUNT", "ADDRESS"]), WITH_SURROGATES)
def test_they_agree_on_strings_holding_surrogates(field: str, key_kind: str, text: str) -> None:
    # As a body brings it: written as escapes and read back, so a high surrogate before a low one
    # becomes one character, exactly as in JSON.parse.
    decoded = json.loads(json.dumps(text or "x"))
    _agree({**BASE, "keyKind": key_kind, field: decoded})
