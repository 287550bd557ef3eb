"""schema/erasure-capability-fixtures.json and schema/erasure/_fixtures.py."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from schema.erasure import (
    CAPABILITY_FIXTURES,
    CHANNEL_CONSTANTS,
    is_expired,
    parse_erasure_request,
    restamp_expires_at,
    serialize_erasure_message,
)
from schema.erasure._errors import ErasureValueError
from tests.schema.erasure.erasure_test_support import load_schema_file

SCHEMA_DEFS = load_schema_file("erasure-contract.schema.json")["$defs"]
PAIRS = CAPABILITY_FIXTURES.pairs
ANSWER_ENUMS = {
    "erasure/ACK": SCHEMA_DEFS["ack"]["properties"]["outcome"]["enum"],
    "erasure/REFILE_ACK": SCHEMA_DEFS["refileAck"]["properties"]["outcome"]["enum"],
    "erasure/HOLDINGS": SCHEMA_DEFS["holdings"]["properties"]["answer"]["enum"],
}
RESPONSE_TO = {
    "erasure/ERASE": "erasure/ACK",
    "erasure/REFILE": "erasure/REFILE_ACK",
    "erasure/CLASSIFY": "erasure/HOLDINGS",
    "erasure/CHECK": "erasure/HOLDINGS",
}
NOW = datetime(2030, 6, 1, 12, 0, 0, 250000, tzinfo=UTC)


def test_the_list_is_named_pairs_in_the_file() -> None:
    assert len(load_schema_file("erasure-capability-fixtures.json")["pairs"]) == len(PAIRS)


def test_there_is_one_pair_for_each_type_and_key_kind_a_store_can_implement() -> None:
    assert sorted((pair.type, pair.key_kind) for pair in PAIRS) == sorted(
        [
            ("erasure/ERASE", "ACCOUNT"),
            ("erasure/ERASE", "ADDRESS"),
            ("erasure/REFILE", "ADDRESS"),
            ("erasure/CLASSIFY", "ACCOUNT"),
            ("erasure/CLASSIFY", "ADDRESS"),
            ("erasure/CHECK", "ACCOUNT"),
            ("erasure/CHECK", "ADDRESS"),
        ]
    )


@pytest.mark.parametrize("pair", PAIRS, ids=[f"{p.type}-{p.key_kind}" for p in PAIRS])
def test_each_request_is_valid_and_of_its_pair(pair: object) -> None:
    request = pair.request  # type: ignore[attr-defined]
    assert parse_erasure_request(serialize_erasure_message(request)) == request
    assert (request.type, request.key_kind) == (pair.type, pair.key_kind)  # type: ignore[attr-defined]


@pytest.mark.parametrize("pair", PAIRS, ids=[f"{p.type}-{p.key_kind}" for p in PAIRS])
def test_each_pair_names_the_answer_type_and_its_outcomes(pair: object) -> None:
    p = pair  # for brevity
    assert p.response_type == RESPONSE_TO[p.type]  # type: ignore[attr-defined]
    assert p.outcome_field == ("answer" if p.response_type == "erasure/HOLDINGS" else "outcome")  # type: ignore[attr-defined]
    enum = ANSWER_ENUMS[p.response_type]  # type: ignore[attr-defined]
    implemented, not_implemented = p.outcomes_when_implemented, p.outcomes_when_not_implemented  # type: ignore[attr-defined]
    assert not_implemented == ("NOT_APPLICABLE",)
    assert set(implemented) | set(not_implemented) == set(enum)
    assert not set(implemented) & set(not_implemented)


def test_expires_at_is_a_placeholder_in_2099() -> None:
    assert CAPABILITY_FIXTURES.expires_at_placeholder.year == 2099
    assert {pair.request.expires_at for pair in PAIRS} == {CAPABILITY_FIXTURES.expires_at_placeholder}


def test_restamping_sets_expires_at_to_now_plus_r() -> None:
    for pair in PAIRS:
        restamped = restamp_expires_at(pair.request, NOW)
        assert restamped.expires_at == NOW + timedelta(seconds=CHANNEL_CONSTANTS.expiry_period_seconds)
        assert restamped.model_dump(exclude={"expires_at"}) == pair.request.model_dump(exclude={"expires_at"})


def test_a_restamped_request_is_valid_and_not_expired_until_r_has_passed() -> None:
    restamped = restamp_expires_at(PAIRS[0].request, NOW)
    parsed = parse_erasure_request(serialize_erasure_message(restamped))
    r = timedelta(seconds=CHANNEL_CONSTANTS.expiry_period_seconds)
    assert not is_expired(parsed, NOW)
    assert not is_expired(parsed, NOW + r - timedelta(milliseconds=1))
    assert is_expired(parsed, NOW + r)


def test_restamping_keeps_the_request_type() -> None:
    assert type(restamp_expires_at(PAIRS[2].request, NOW)) is type(PAIRS[2].request)


def test_restamping_writes_utc_whatever_the_clocks_zone() -> None:
    east = NOW.astimezone(timezone(timedelta(hours=2)))
    restamped = restamp_expires_at(PAIRS[0].request, east)
    assert restamped.expires_at.utcoffset() == timedelta(0)
    assert serialize_erasure_message(restamped).count("Z") >= 1


def test_restamping_refuses_a_naive_clock() -> None:
    with pytest.raises(ErasureValueError):
        restamp_expires_at(PAIRS[0].request, datetime(2030, 1, 1))
