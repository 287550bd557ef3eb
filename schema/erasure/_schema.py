"""The contract's JSON Schema and its validators, each built once.

The format checker must hold a `date-time` check: jsonschema has one only when rfc3339-validator is
installed, and without it bad dates would pass silently. That is checked here, at import.
"""

from __future__ import annotations

__all__ = [
    "FORMAT_CHECKER",
    "MESSAGE_VALIDATOR",
    "REQUEST_VALIDATOR",
    "RESPONSE_VALIDATOR",
    "erasure_contract_schema",
]

import copy
from typing import Any

from jsonschema import Draft202012Validator
from referencing import Registry, Resource

from schema.erasure._errors import ErasureValueError
from schema.erasure._resources import CONTRACT_SCHEMA_FILE, read_json_resource

_SCHEMA: dict[str, Any] = read_json_resource(CONTRACT_SCHEMA_FILE)
_SCHEMA_ID: str = _SCHEMA["$id"]

FORMAT_CHECKER = Draft202012Validator.FORMAT_CHECKER
if "date-time" not in FORMAT_CHECKER.checkers:  # pragma: no cover - an installation fault
    raise ErasureValueError("jsonschema has no date-time format check: install rfc3339-validator")

_REGISTRY: Registry[Any] = Registry().with_resource(_SCHEMA_ID, Resource.from_contents(_SCHEMA))


def _validator_for(definition: str) -> Any:
    return Draft202012Validator(
        {"$ref": f"{_SCHEMA_ID}#/$defs/{definition}"}, registry=_REGISTRY, format_checker=FORMAT_CHECKER
    )


MESSAGE_VALIDATOR: Any = Draft202012Validator(_SCHEMA, registry=_REGISTRY, format_checker=FORMAT_CHECKER)
REQUEST_VALIDATOR: Any = _validator_for("request")
RESPONSE_VALIDATOR: Any = _validator_for("response")


def erasure_contract_schema() -> dict[str, Any]:
    """A copy of schema/erasure-contract.schema.json (JSON Schema 2020-12)."""
    return copy.deepcopy(_SCHEMA)
