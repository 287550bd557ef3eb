"""schema/erasure-conformance-corpus.json: one verdict from two validators, on every entry.

The JSON Schema (jsonschema, validator built once, format checker with a date-time check) and the strict
pydantic models must each give the entry's expected verdict, and so must `parse_erasure_request`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from pydantic import ValidationError

from schema.erasure import REQUEST_TYPES
from schema.erasure._json import NOT_JSON, load_json_text
from schema.erasure._models import message_adapter
from schema.erasure._resources import CONFORMANCE_CORPUS_FILE, read_json_resource
from tests.schema.erasure.erasure_test_support import (
    SCHEMA_DIR,
    corpus_body,
    corpus_entries,
    entry_names,
    load_schema_file,
    parser_verdict,
)

CORPUS = load_schema_file("erasure-conformance-corpus.json")
ENTRIES = corpus_entries()
VERDICTS = {"accepted", "NOT_JSON", "INVALID_MESSAGE", "NOT_A_REQUEST"}

# Built once, here, from the file: the validator any other twin would build.
SCHEMA_VALIDATOR = Draft202012Validator(
    load_schema_file("erasure-contract.schema.json"), format_checker=Draft202012Validator.FORMAT_CHECKER
)
assert "date-time" in SCHEMA_VALIDATOR.format_checker.checkers
MODELS = message_adapter()


def _verdict_of_valid(value: Any) -> str:
    return "accepted" if value["type"] in REQUEST_TYPES else "NOT_A_REQUEST"


def schema_verdict(body: str | bytes) -> str:
    value = load_json_text(body)
    if value is NOT_JSON:
        return "NOT_JSON"
    return _verdict_of_valid(value) if SCHEMA_VALIDATOR.is_valid(value) else "INVALID_MESSAGE"


def models_verdict(body: str | bytes) -> str:
    value = load_json_text(body)
    if value is NOT_JSON:
        return "NOT_JSON"
    try:
        message = MODELS.validate_python(value, by_alias=True, by_name=False)
    except ValidationError:
        return "INVALID_MESSAGE"
    return "accepted" if message.type in REQUEST_TYPES else "NOT_A_REQUEST"


@pytest.mark.parametrize("entry", ENTRIES, ids=entry_names(ENTRIES))
def test_both_validators_give_the_expected_verdict(entry: dict[str, Any]) -> None:
    body = corpus_body(entry)
    assert (schema_verdict(body), models_verdict(body)) == (entry["expected"], entry["expected"])


@pytest.mark.parametrize("entry", ENTRIES, ids=entry_names(ENTRIES))
def test_the_parser_gives_the_expected_verdict(entry: dict[str, Any]) -> None:
    assert parser_verdict(corpus_body(entry)) == entry["expected"]


VALID_ENTRIES = [entry for entry in ENTRIES if "messageType" in entry]


@pytest.mark.parametrize("entry", VALID_ENTRIES, ids=entry_names(VALID_ENTRIES))
def test_a_valid_message_parses_to_its_type(entry: dict[str, Any]) -> None:
    value = load_json_text(corpus_body(entry))
    assert MODELS.validate_python(value, by_alias=True, by_name=False).type == entry["messageType"]


def test_every_entry_is_well_formed() -> None:
    names = [entry["name"] for entry in ENTRIES]
    assert len(names) == len(set(names))
    for entry in ENTRIES:
        assert entry["expected"] in VERDICTS, entry["name"]
        assert entry["bodyEncoding"] in CORPUS["bodyEncodings"], entry["name"]
        assert entry["note"], entry["name"]
        assert ("messageType" in entry) == (entry["expected"] in {"accepted", "NOT_A_REQUEST"}), entry["name"]
        assert entry.get("ourReading", next(iter(CORPUS["ourReadings"]))) in CORPUS["ourReadings"]


def test_every_verdict_and_every_reading_is_exercised() -> None:
    assert {entry["expected"] for entry in ENTRIES} == VERDICTS
    assert {entry["ourReading"] for entry in ENTRIES if "ourReading" in entry} == set(CORPUS["ourReadings"])


def test_the_corpus_file_is_plain_utf8_json_any_twin_can_read() -> None:
    raw = (SCHEMA_DIR / "erasure-conformance-corpus.json").read_bytes()
    text = raw.decode("utf-8")  # strict
    assert load_json_text(raw) is not NOT_JSON
    assert json.loads(text) == CORPUS


@pytest.mark.parametrize(
    "name",
    [
        "time-with-trailing-newline",
        "address-key-kelvin-sign",
        "time-with-plus-zero-offset",
        "time-without-zone",
        "time-with-space-for-T",
        "time-without-seconds",
        "extra-field",
        "erase-missing-key",
        "request-id-number",
        "send-no-written-1.0",
        "nan",
        "infinity",
        "minus-infinity",
        "invalid-utf8-byte-ff",
        "ack-outcome-of-refile-ack",
        "ack-done",
        "json-array",
        "address-key-quarantine",
        "refile-from-quarantine",
        "refile-to-quarantine",
        "duplicate-key-last-valid",
        "lone-high-surrogate-escape",
        "raw-lone-surrogate-in-a-text-body",
        "extra-field-named-lone-surrogate",
        "surrogate-pair-escape-in-account-key",
        "time-year-zero",
        "time-year-one",
        "nested-991-arrays",
        "nested-arrays-at-the-sqs-body-limit",
        "nested-arrays-unclosed-at-the-sqs-body-limit",
        "key-near-the-sqs-body-limit",
    ],
)
def test_the_corpus_covers_the_issues_traps(name: str) -> None:
    assert name in {entry["name"] for entry in ENTRIES}


def test_the_corpus_is_the_file_shipped_beside_the_package() -> None:
    assert read_json_resource(CONFORMANCE_CORPUS_FILE) == CORPUS
    assert Path(SCHEMA_DIR / CONFORMANCE_CORPUS_FILE).is_file()


@pytest.mark.parametrize("reading", sorted(set(CORPUS["reconciliations"]) - {"$comment"}))
def test_every_reconciled_disagreement_says_what_was_decided_and_what_dotnet_should_do(reading: str) -> None:
    reconciliation = CORPUS["reconciliations"][reading]
    assert reconciliation["was"]
    assert reconciliation["decided"]
    assert reconciliation["dotnet"]


def test_every_body_fits_in_an_sqs_message() -> None:
    for entry in ENTRIES:
        body = corpus_body(entry)
        # A raw lone surrogate has no UTF-8 form; as the JavaScript string it stands for, it is 3 bytes.
        size = len(body) if isinstance(body, bytes) else len(body.encode("utf-8", "surrogatepass"))
        assert size <= 262_144, entry["name"]
