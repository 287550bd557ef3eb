"""Reading the contract's language-neutral JSON files, which sit beside the package in `schema/`."""

from __future__ import annotations

__all__ = [
    "CAPABILITY_FIXTURES_FILE",
    "CHANNEL_CONSTANTS_FILE",
    "CONFORMANCE_CORPUS_FILE",
    "CONTRACT_SCHEMA_FILE",
    "read_json_resource",
    "read_text_resource",
]

import json
from importlib import resources
from typing import Any

CONTRACT_SCHEMA_FILE = "erasure-contract.schema.json"
CHANNEL_CONSTANTS_FILE = "erasure-channel-constants.json"
CAPABILITY_FIXTURES_FILE = "erasure-capability-fixtures.json"
CONFORMANCE_CORPUS_FILE = "erasure-conformance-corpus.json"


def read_text_resource(name: str) -> str:
    """One of the JSON files shipped in the `schema` package, as text."""
    return resources.files("schema").joinpath(name).read_text(encoding="utf-8")


def read_json_resource(name: str) -> Any:
    """One of the JSON files shipped in the `schema` package, parsed with the standard library."""
    return json.loads(read_text_resource(name))
