"""Helpers shared by the erasure contract's tests (not fixtures: parametrisation needs them at import)."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

from schema.erasure import ErasureContractError, parse_erasure_request

SCHEMA_DIR = Path(__file__).resolve().parents[3] / "schema"


def load_schema_file(name: str) -> Any:
    return json.loads((SCHEMA_DIR / name).read_text(encoding="utf-8"))


def corpus_entries() -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = load_schema_file("erasure-conformance-corpus.json")["entries"]
    return entries


def corpus_body(entry: dict[str, Any]) -> str | bytes:
    if entry["bodyEncoding"] == "base64":
        return base64.b64decode(entry["body"], validate=True)
    assert entry["bodyEncoding"] == "text"
    body: str = entry["body"]
    return body


def entry_names(entries: list[dict[str, Any]]) -> list[str]:
    """The entries' names, as test ids."""
    return [entry["name"] for entry in entries]


def parser_verdict(body: str | bytes) -> str:
    """`parse_erasure_request`'s verdict on `body`: "accepted" or the error's code."""
    try:
        parse_erasure_request(body)
    except ErasureContractError as error:
        return error.code.value
    return "accepted"


def receive_all(sqs_client: Any, queue_url: str) -> list[dict[str, Any]]:
    response = sqs_client.receive_message(
        QueueUrl=queue_url,
        MaxNumberOfMessages=10,
        WaitTimeSeconds=0,
        MessageAttributeNames=["All"],
        MessageSystemAttributeNames=["All"],
    )
    messages: list[dict[str, Any]] = response.get("Messages", [])
    return messages
