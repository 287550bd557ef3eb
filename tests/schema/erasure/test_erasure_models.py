"""schema/erasure/_models.py: strict models, built in Python with snake_case, written as camelCase."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from pydantic import ValidationError

from schema.erasure import (
    AckResponse,
    EraseRequest,
    HoldingsResponse,
    RefileRequest,
    parse_erasure_message,
    serialize_erasure_message,
)
from schema.erasure._models import format_utc_time, message_adapter

WHEN = datetime(2099, 1, 1, tzinfo=UTC)


def _erase(**changes: object) -> dict[str, object]:
    body: dict[str, object] = {
        "type": "erasure/ERASE",
        "requestId": "req-1",
        "sendNo": 1,
        "expiresAt": "2099-01-01T00:00:00.000Z",
        "keyKind": "ACCOUNT",
        "key": "acct-1",
    }
    body.update(changes)
    return body


def test_python_code_builds_a_model_with_snake_case_names() -> None:
    ack = AckResponse(request_id="req-1", send_no=2, subscriber="space", outcome="DONE")
    assert ack.model_dump(mode="json") == {
        "type": "erasure/ACK",
        "requestId": "req-1",
        "sendNo": 2,
        "subscriber": "space",
        "outcome": "DONE",
    }


def test_from_is_spelled_from_underscore_in_python_and_from_on_the_wire() -> None:
    refile = RefileRequest(
        request_id="r",
        send_no=1,
        expires_at=WHEN,
        key_kind="ADDRESS",
        from_="a@x",
        to="b@x",
        account_id="acct",
    )
    assert refile.model_dump(mode="json")["from"] == "a@x"


def test_the_wire_accepts_camel_case_only() -> None:
    snake = _erase()
    snake["request_id"] = snake.pop("requestId")
    with pytest.raises(ValidationError):
        message_adapter().validate_python(snake, by_alias=True, by_name=False)


def test_send_no_written_as_an_integral_float_becomes_an_int() -> None:
    message = message_adapter().validate_python(_erase(sendNo=1.0), by_alias=True, by_name=False)
    assert message.send_no == 1
    assert type(message.send_no) is int


@pytest.mark.parametrize("send_no", [1.5, "1", True, float("inf"), float("nan"), 0, 2_147_483_648])
def test_send_no_refuses_what_is_not_an_integer_from_1(send_no: object) -> None:
    with pytest.raises(ValidationError):
        message_adapter().validate_python(_erase(sendNo=send_no), by_alias=True, by_name=False)


def test_a_wire_time_becomes_an_aware_utc_datetime() -> None:
    message = message_adapter().validate_python(
        _erase(expiresAt="2099-01-01T00:00:00.123456789Z"), by_alias=True, by_name=False
    )
    assert message.expires_at == datetime(2099, 1, 1, 0, 0, 0, 123456, tzinfo=UTC)


def test_times_are_written_as_javascript_writes_them() -> None:
    assert format_utc_time(WHEN) == "2099-01-01T00:00:00.000Z"
    assert format_utc_time(WHEN + timedelta(microseconds=123456)) == "2099-01-01T00:00:00.123456Z"


def test_a_python_datetime_must_be_aware_and_utc() -> None:
    with pytest.raises(ValidationError):
        EraseRequest(request_id="r", send_no=1, expires_at=datetime(2099, 1, 1), key_kind="ACCOUNT", key="k")
    with pytest.raises(ValidationError):
        EraseRequest(
            request_id="r",
            send_no=1,
            expires_at=datetime(2099, 1, 1, tzinfo=timezone(timedelta(hours=1))),
            key_kind="ACCOUNT",
            key="k",
        )


def test_an_address_key_with_a_to_z_is_refused_in_python_too() -> None:
    with pytest.raises(ValidationError):
        HoldingsResponse(request_id="r", subscriber="s", key_kind="ADDRESS", key="A@x", answer="HOLDS_NONE")


def test_models_are_frozen() -> None:
    ack = AckResponse(request_id="r", send_no=1, subscriber="s", outcome="DONE")
    with pytest.raises(ValidationError):
        ack.outcome = "NOT_APPLICABLE"  # type: ignore[misc]


def test_a_serialised_message_parses_back_to_an_equal_model() -> None:
    erase = EraseRequest(
        request_id="r-\u00e9", send_no=3, expires_at=WHEN, key_kind="ADDRESS", key="\u212aelvin@x"
    )
    body = serialize_erasure_message(erase)
    assert parse_erasure_message(body) == erase


@pytest.mark.parametrize("field", ["requestId", "key"])
@pytest.mark.parametrize("lone", ["\ud800", "\udbff", "\udc00", "\udfff"])
def test_a_string_holding_a_lone_surrogate_is_refused(field: str, lone: str) -> None:
    with pytest.raises(ValidationError):
        message_adapter().validate_python(_erase(**{field: f"x{lone}y"}), by_alias=True, by_name=False)


def test_python_code_cannot_build_a_model_holding_a_surrogate() -> None:
    # In a Python str even two surrogates in pair order are two lone surrogates, not a character.
    with pytest.raises(ValidationError):
        AckResponse(request_id="r-\ud83d\ude00", send_no=1, subscriber="s", outcome="DONE")


def test_a_character_beyond_u_ffff_is_an_ordinary_character() -> None:
    erase = message_adapter().validate_python(_erase(key="acct-\U0001f600"), by_alias=True, by_name=False)
    assert erase.key == "acct-\U0001f600"


def test_year_zero_is_refused_and_year_one_is_not() -> None:
    with pytest.raises(ValidationError):
        message_adapter().validate_python(
            _erase(expiresAt="0000-01-01T00:00:00Z"), by_alias=True, by_name=False
        )
    erase = message_adapter().validate_python(
        _erase(expiresAt="0001-01-01T00:00:00Z"), by_alias=True, by_name=False
    )
    assert erase.expires_at == datetime(1, 1, 1, tzinfo=UTC)


def test_fraction_digits_past_microseconds_are_truncated_never_rounded_into_the_next_year() -> None:
    erase = message_adapter().validate_python(
        _erase(expiresAt="9999-12-31T23:59:59.999999999Z"), by_alias=True, by_name=False
    )
    assert erase.expires_at == datetime(9999, 12, 31, 23, 59, 59, 999_999, tzinfo=UTC)
