"""Whether a stored stream record is an erased user's: the user its event names when it decodes, else a
match of its bytes and their JSON-unescaped text against the erased keys, whatever the decoder raised."""

from __future__ import annotations

import json

import pytest

from processors.erasure._record_match import UNESCAPE_ROUNDS, ErasedKeys, json_unescaped
from tests.support.stream_records import insert

ARN = "arn:aws:dynamodb:eu-west-1:000000000000:table/t/stream/2026-01-01T00:00:00.000"
WHERE = {"stream_arn": ARN, "shard_id": "shardId-00000001700000000000-match", "sequence_number": "100"}
GONE = "9f0c7a52-gone-4e1b-a3f5-000000000001"
KEPT = "9f0c7a52-kept-4e1b-a3f5-000000000002"


def record(
    user_id: str, *, array_account: str = "arr-1", event_id: str = "ev-1", sequence_number: str = "100"
) -> bytes:
    """An adapter-shape INSERT of an Active entitlement row of `user_id`."""
    keys = {"pk": {"S": f"USER#{user_id}"}, "sk": {"S": f"ENTITLEMENT#{array_account}"}}
    row = {
        **keys,
        "userId": {"S": user_id},
        "arrayAccountId": {"S": array_account},
        "status": {"S": "Active"},
    }
    return insert(row, event_id=event_id, sequence_number=sequence_number, created_at_ms=1767225600000)


def escaped(text: str) -> str:
    """Every character of `text` as a JSON \\u escape."""
    return "".join(f"\\u{ord(c):04x}" for c in text)


def test_a_record_that_decodes_belongs_to_the_user_its_event_names() -> None:
    keys = ErasedKeys.of([GONE])
    assert keys.record_belongs(record(GONE), **WHERE)
    assert not keys.record_belongs(record(KEPT), **WHERE)


def test_a_record_the_decoder_raises_anything_on_is_matched_on_its_bytes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def recursion(*_: object, **__: object) -> object:
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr("processors.erasure._record_match.decode_record", recursion)
    keys = ErasedKeys.of([GONE])
    assert keys.record_belongs(record(GONE), **WHERE)
    assert not keys.record_belongs(record(KEPT), **WHERE)


def test_a_key_written_with_json_escapes_is_matched_on_the_unescaped_text() -> None:
    raw = ('{"Keys": {"pk": {"S": "\\u0055SER#' + escaped(GONE) + '"}}, "broken').encode()
    assert GONE.encode() not in raw
    assert ErasedKeys.of([GONE]).named_in(raw)
    assert not ErasedKeys.of([KEPT]).named_in(raw)


def test_an_id_outside_the_basic_plane_is_matched_through_its_surrogate_pair_escape() -> None:
    user = "user-\N{GRINNING FACE}"
    raw = b'{"userId": "user-\\ud83d\\ude00", "broken'
    assert ErasedKeys.of([user]).named_in(raw)


def test_json_written_inside_a_json_string_is_unescaped_again() -> None:
    inner = json.dumps({"pk": f"USER#{GONE}"}).replace("U", "\\u0055")
    raw = json.dumps({"note": inner}).encode()  # the escapes are escaped once more
    assert f"USER#{GONE}".encode() not in raw and f"USER#{GONE}" not in json_unescaped(raw.decode())
    assert ErasedKeys.of([GONE]).named_in(raw)


def test_a_text_still_changing_after_every_unescape_round_cannot_be_ruled_out() -> None:
    nested = "\\u0078"  # x, escaped
    for _ in range(UNESCAPE_ROUNDS):
        nested = nested.replace("\\", "\\u005c")  # escaped once more
    assert ErasedKeys.of([KEPT]).named_in(nested.encode())
    assert not ErasedKeys.of([KEPT]).named_in(nested.replace("\\u005c", "\\", 1).encode())


def test_a_record_naming_an_array_account_the_erasure_found_is_matched_when_it_does_not_decode() -> None:
    raw = b'{"Keys": {"sk": {"S": "ENTITLEMENT#arr-found-77"}}, "broken'
    assert ErasedKeys.of([GONE], ["arr-found-77"]).named_in(raw)
    assert not ErasedKeys.of([GONE]).named_in(raw)


def test_invalid_utf8_and_a_lone_surrogate_escape_are_read_not_refused() -> None:
    raw = b'\xff\xfe{"pk": "\\ud800USER#' + GONE.encode() + b'"'
    assert ErasedKeys.of([GONE]).named_in(raw)
    assert not ErasedKeys.of([KEPT]).named_in(raw)


def undecodable(user_id: str, **fields: str) -> bytes:
    """A record of `user_id` the decoder refuses (an event name it does not know), still valid JSON."""
    return record(user_id, **fields).replace(b'"INSERT"', b'"UPSERT"')


@pytest.mark.parametrize("short", ["1", "a", "S", "100"])
def test_a_short_key_matches_no_other_users_undecodable_record(short: str) -> None:
    keys = ErasedKeys.of([short])
    others = [
        undecodable("1x", event_id="1", sequence_number="1"),
        undecodable("12", array_account="a-1"),
        undecodable("user-1"),
        undecodable("a.b"),
    ]
    assert [raw for raw in others if keys.record_belongs(raw, **WHERE)] == []


def test_an_undecodable_json_record_is_matched_on_a_string_value_equal_to_the_key() -> None:
    raw = undecodable("1")
    assert ErasedKeys.of(["1"]).record_belongs(raw, **WHERE)
    assert not ErasedKeys.of(["USER"]).record_belongs(raw, **WHERE)


def test_an_undecodable_json_record_is_matched_on_the_key_as_a_json_number() -> None:
    assert ErasedKeys.of(["42"]).named_in(b'{"userId": 42.0, "broken": true}')
    assert not ErasedKeys.of(["42"]).named_in(b'{"userId": 420, "broken": true}')


def test_bytes_that_are_not_json_match_the_key_only_where_no_id_character_borders_it() -> None:
    keys = ErasedKeys.of(["1"])
    assert keys.named_in(b'{"pk": {"S": "USER#1"}, "trunc')
    assert keys.named_in(b"\xff userId=1;")
    assert not keys.named_in(
        b'{"pk": {"S": "USER#12"}, "sk": "ENTITLEMENT#arr-1", "SequenceNumber": "1001", "tr'
    )
    assert not keys.named_in(b"\xff user-1x 1.5 a:1")
