"""schema/erasure/_parse.py: `parse_erasure_request`, `parse_erasure_message` and `is_expired`."""

from __future__ import annotations

import json
import pickle
from datetime import UTC, datetime, timedelta, timezone

import pytest

from schema.erasure import (
    CAPABILITY_FIXTURES,
    CheckRequest,
    ClassifyRequest,
    EraseRequest,
    ErasureContractError,
    RefileRequest,
    is_expired,
    parse_erasure_message,
    parse_erasure_request,
    serialize_erasure_message,
)
from schema.erasure._errors import ErasureContractErrorCode, ErasureValueError
from schema.errors import EntitlementsError, TerminalError

ERASE = (
    '{"type":"erasure/ERASE","requestId":"req-1","sendNo":1,"expiresAt":"2099-01-01T00:00:00.000Z",'
    '"keyKind":"ACCOUNT","key":"acct-1"}'
)
ACK = '{"type":"erasure/ACK","requestId":"req-1","sendNo":1,"subscriber":"space","outcome":"DONE"}'
BAD_BODIES = {
    ErasureContractErrorCode.NOT_JSON: "{not json",
    ErasureContractErrorCode.INVALID_MESSAGE: '{"type":"erasure/ERASE","requestId":1}',
    ErasureContractErrorCode.NOT_A_REQUEST: ACK,
}


def _error(body: str) -> ErasureContractError:
    with pytest.raises(ErasureContractError) as caught:
        parse_erasure_request(body)
    return caught.value


def test_a_valid_request_parses_to_its_typed_model() -> None:
    request = parse_erasure_request(ERASE)
    assert isinstance(request, EraseRequest)
    assert (request.request_id, request.send_no, request.key_kind, request.key) == (
        "req-1",
        1,
        "ACCOUNT",
        "acct-1",
    )
    assert request.expires_at == datetime(2099, 1, 1, tzinfo=UTC)


def test_bytes_parse_like_str() -> None:
    assert parse_erasure_request(ERASE.encode()) == parse_erasure_request(ERASE)


@pytest.mark.parametrize(
    ("message_type", "model"),
    [
        ("erasure/REFILE", RefileRequest),
        ("erasure/CLASSIFY", ClassifyRequest),
        ("erasure/CHECK", CheckRequest),
    ],
)
def test_each_request_type_parses_to_its_own_model(message_type: str, model: type) -> None:
    request = next(pair.request for pair in CAPABILITY_FIXTURES.pairs if pair.type == message_type)
    assert type(parse_erasure_request(serialize_erasure_message(request))) is model


@pytest.mark.parametrize("code", list(BAD_BODIES))
def test_the_error_message_is_the_code_alone(code: ErasureContractErrorCode) -> None:
    error = _error(BAD_BODIES[code])
    assert error.code is code
    assert str(error) == code.value
    assert error.args == (code.value,)


@pytest.mark.parametrize("code", list(BAD_BODIES))
def test_the_error_chains_nothing(code: ErasureContractErrorCode) -> None:
    error = _error(BAD_BODIES[code])
    assert error.__cause__ is None
    assert error.__context__ is None
    assert error.__suppress_context__ is True


def test_the_error_is_a_terminal_entitlements_error() -> None:
    error = _error(BAD_BODIES[ErasureContractErrorCode.NOT_JSON])
    assert isinstance(error, TerminalError)
    assert isinstance(error, EntitlementsError)


def test_the_error_survives_pickling_with_its_code() -> None:
    error = pickle.loads(pickle.dumps(_error(ACK)))
    assert error.code is ErasureContractErrorCode.NOT_A_REQUEST


def test_parse_erasure_message_returns_answers_too() -> None:
    assert parse_erasure_message(ACK).type == "erasure/ACK"


def test_parse_erasure_message_does_not_judge_expiry() -> None:
    past = ERASE.replace("2099-", "2001-")
    assert parse_erasure_request(past).expires_at.year == 2001


def test_a_request_is_not_expired_before_its_expiry() -> None:
    request = parse_erasure_request(ERASE)
    assert not is_expired(request, request.expires_at - timedelta(microseconds=1))


def test_a_request_is_expired_at_and_after_its_expiry() -> None:
    request = parse_erasure_request(ERASE)
    assert is_expired(request, request.expires_at)
    assert is_expired(request, request.expires_at + timedelta(seconds=1))


def test_is_expired_compares_instants_across_zones() -> None:
    request = parse_erasure_request(ERASE)
    one_hour_east = request.expires_at.astimezone(timezone(timedelta(hours=1)))
    assert is_expired(request, one_hour_east)


def test_is_expired_refuses_a_naive_clock() -> None:
    with pytest.raises(ErasureValueError):
        is_expired(parse_erasure_request(ERASE), datetime(2099, 1, 1))


@pytest.mark.parametrize(
    "body",
    [
        ERASE.replace("req-1", "req-\\ud800"),
        ERASE.replace('"acct-1"', '"acct-1","\\udc00":1'),
        ERASE.replace('"acct-1"', '"acct-\ud800"'),
        "[" * 991 + "]" * 991,
        "[" * 131_071 + "]" * 131_071,
        ERASE.replace('"acct-1"', '{"a":' * 2_000 + "1" + "}" * 2_000),
    ],
    ids=[
        "lone-surrogate-escape",
        "extra-field-named-lone-surrogate",
        "raw-lone-surrogate-in-a-string",
        "nested-991",
        "nested-at-sqs-limit",
        "deep-key",
    ],
)
def test_json_the_contract_refuses_is_an_invalid_message_as_in_the_node_reference(body: str) -> None:
    assert _error(body).code is ErasureContractErrorCode.INVALID_MESSAGE


@pytest.mark.parametrize("body", ["[" * 131_072, "[" * 991 + "x" + "]" * 991, '["a"\ud800]'])
def test_text_that_is_not_json_at_any_depth_is_not_json(body: str) -> None:
    assert _error(body).code is ErasureContractErrorCode.NOT_JSON


def test_a_serialised_message_writes_non_ascii_characters_as_themselves() -> None:
    erase = EraseRequest(
        request_id="r",
        send_no=1,
        expires_at=datetime(2099, 1, 1, tzinfo=UTC),
        key_kind="ACCOUNT",
        key="\u00e9\U0001f600",
    )
    body = serialize_erasure_message(erase)
    assert '"key":"\u00e9\U0001f600"' in body
    assert len(body.encode("utf-8")) < len(json.dumps(json.loads(body)).encode("utf-8"))


def test_a_serialised_message_escapes_what_sqs_refuses_and_json_must() -> None:
    erase = EraseRequest(
        request_id="r\ufffe\uffff",
        send_no=1,
        expires_at=datetime(2099, 1, 1, tzinfo=UTC),
        key_kind="ACCOUNT",
        key='k"\\\n\x00\x1f',
    )
    body = serialize_erasure_message(erase)
    assert "\ufffe" not in body and "\uffff" not in body
    assert all(ch == "\t" or ch >= " " for ch in body)
    assert parse_erasure_request(body) == erase
