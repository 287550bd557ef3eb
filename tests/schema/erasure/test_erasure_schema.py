"""schema/erasure-contract.schema.json: a valid 2020-12 schema whose definitions are the seed's table."""

from __future__ import annotations

import re
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from jsonschema.validators import validator_for

from schema.erasure import erasure_contract_schema
from schema.erasure._schema import FORMAT_CHECKER, MESSAGE_VALIDATOR
from tests.schema.erasure.erasure_test_support import load_schema_file

SCHEMA = load_schema_file("erasure-contract.schema.json")
DEFS = SCHEMA["$defs"]

# The seed's table, field for field.
TABLE = {
    "erase": ("erasure/ERASE", {"requestId", "sendNo", "expiresAt", "keyKind", "key"}),
    "refile": ("erasure/REFILE", {"requestId", "sendNo", "expiresAt", "keyKind", "from", "to", "accountId"}),
    "classify": ("erasure/CLASSIFY", {"requestId", "expiresAt", "keyKind", "key"}),
    "check": ("erasure/CHECK", {"requestId", "expiresAt", "keyKind", "key"}),
    "ack": ("erasure/ACK", {"requestId", "sendNo", "subscriber", "outcome"}),
    "refileAck": ("erasure/REFILE_ACK", {"requestId", "sendNo", "subscriber", "outcome"}),
    "holdings": ("erasure/HOLDINGS", {"requestId", "subscriber", "keyKind", "key", "answer"}),
}
TIME_PATTERN = DEFS["utcTime"]["pattern"]


def _walk(node: Any) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    if isinstance(node, dict):
        found.append(node)
        for value in node.values():
            found.extend(_walk(value))
    elif isinstance(node, list):
        for value in node:
            found.extend(_walk(value))
    return found


def test_the_schema_is_a_valid_2020_12_schema() -> None:
    assert SCHEMA["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert validator_for(SCHEMA) is Draft202012Validator
    Draft202012Validator.check_schema(SCHEMA, format_checker=Draft202012Validator.FORMAT_CHECKER)


def test_the_format_checker_checks_date_time() -> None:
    assert "date-time" in FORMAT_CHECKER.checkers
    assert MESSAGE_VALIDATOR.format_checker is FORMAT_CHECKER


def test_the_package_reads_the_same_schema_file() -> None:
    assert erasure_contract_schema() == SCHEMA


@pytest.mark.parametrize("definition", sorted(TABLE))
def test_each_message_definition_has_exactly_the_tables_fields(definition: str) -> None:
    message_type, fields = TABLE[definition]
    schema = DEFS[definition]
    assert schema["properties"]["type"] == {"const": message_type}
    assert set(schema["properties"]) == fields | {"type"}
    assert set(schema["required"]) == fields | {"type"}
    assert schema["additionalProperties"] is False


def test_the_outcomes_and_answers_are_the_tables_enums() -> None:
    assert DEFS["ack"]["properties"]["outcome"]["enum"] == ["DONE", "NOT_APPLICABLE"]
    assert DEFS["refileAck"]["properties"]["outcome"]["enum"] == [
        "MOVED",
        "NONE_OWNED",
        "NOT_MOVED",
        "NOT_APPLICABLE",
    ]
    assert DEFS["holdings"]["properties"]["answer"]["enum"] == [
        "HOLDS_DATA",
        "HOLDS_NONE",
        "CANNOT_ANSWER",
        "NOT_APPLICABLE",
    ]


def test_refile_key_kind_is_address_only() -> None:
    assert DEFS["refile"]["properties"]["keyKind"] == {"const": "ADDRESS"}


def test_no_email_format_or_normalising_type_is_used() -> None:
    formats = {node["format"] for node in _walk(SCHEMA) if "format" in node}
    assert formats == {"date-time"}


@pytest.mark.parametrize(
    "definition",
    ["requestId", "subscriber", "accountId", "sendNo", "key", "utcTime", "address", "text"],
)
def test_every_rule_of_our_own_reading_is_marked_in_a_comment(definition: str) -> None:
    assert "OUR READING" in DEFS[definition]["$comment"]


def test_refile_from_and_to_are_marked_as_our_reading() -> None:
    properties = DEFS["refile"]["properties"]
    assert "OUR READING" in properties["from"]["$comment"]
    assert "OUR READING" in properties["to"]["$comment"]


def test_every_pattern_ending_in_dollar_is_guarded_against_a_trailing_newline() -> None:
    patterns = [node["pattern"] for node in _walk(SCHEMA) if "pattern" in node]
    assert patterns
    for pattern in patterns:
        assert not pattern.endswith("$"), pattern


@pytest.mark.parametrize("suffix", ["\n", "\r\n", " ", "\n\n"])
def test_the_time_pattern_refuses_trailing_whitespace_under_pythons_re(suffix: str) -> None:
    assert re.search(TIME_PATTERN, "2099-01-01T00:00:00Z")
    assert re.search(TIME_PATTERN, "2099-01-01T00:00:00Z" + suffix) is None


def test_an_unguarded_dollar_would_let_a_trailing_newline_through() -> None:
    # Why the guard exists: Python's $ matches before a final newline.
    unguarded = TIME_PATTERN.removesuffix("(?!\\n)")
    assert unguarded.endswith("$")
    assert re.search(unguarded, "2099-01-01T00:00:00Z\n")


def test_the_date_time_format_alone_does_not_catch_a_trailing_newline() -> None:
    # So the pattern has to: rfc3339-validator's own regex ends in $.
    assert FORMAT_CHECKER.conforms("2099-01-01T00:00:00Z\n", "date-time")


LONE_SURROGATE = DEFS["text"]["not"]["pattern"]


def _utf16_units(text: str) -> str:
    """`text` as UTF-16 code units, one str character each: how .NET (and JavaScript without the u flag)
    sees a string."""
    data = text.encode("utf-16-le", "surrogatepass")
    return "".join(chr(int.from_bytes(data[i : i + 2], "little")) for i in range(0, len(data), 2))


@pytest.mark.parametrize("definition", ["requestId", "subscriber", "accountId", "key", "address"])
def test_every_free_form_string_is_held_to_the_text_rule(definition: str) -> None:
    assert DEFS[definition]["$ref"] == "#/$defs/text"
    assert DEFS[definition]["type"] == "string"


@pytest.mark.parametrize("lone", ["\ud800", "\udbff", "\udc00", "\udfff", "\ude00\ud83d"])
def test_the_text_rule_finds_a_lone_surrogate_in_code_points_and_in_utf16_units(lone: str) -> None:
    assert re.search(LONE_SURROGATE, f"a{lone}b")
    assert re.search(LONE_SURROGATE, _utf16_units(f"a{lone}b"))


@pytest.mark.parametrize(
    "text", ["plain", "\u00e9\u212a", "\U0001f600", "a\U0010ffffb", "\U0001f600\U0001f600"]
)
def test_the_text_rule_never_matches_half_of_a_pair(text: str) -> None:
    assert re.search(LONE_SURROGATE, text) is None
    units = _utf16_units(text)
    assert re.search(LONE_SURROGATE, units) is None


@pytest.mark.parametrize("year", ["0000"])
def test_the_time_pattern_refuses_year_zero(year: str) -> None:
    assert re.search(TIME_PATTERN, f"{year}-01-01T00:00:00Z") is None


@pytest.mark.parametrize("year", ["0001", "0010", "0100", "1000", "9999"])
def test_the_time_pattern_accepts_years_one_to_9999(year: str) -> None:
    assert re.search(TIME_PATTERN, f"{year}-01-01T00:00:00Z")


def test_every_branch_that_uses_object_keywords_says_type_object() -> None:
    # ajv's strictTypes rule, checked here too so that the reason is plain in Python.
    object_keywords = {"properties", "required", "additionalProperties"}
    for node in _walk(SCHEMA):
        if object_keywords & set(node):
            assert node.get("type") == "object", node
