"""Why the contract refuses a body: each refusal as the JSON path it concerns and the rule it breaks.

    refusal_reasons('{"type": "erasure/ERASE", "sendNo": 0}')
    # [Refusal("$.requestId", "required"), ..., Refusal("$.sendNo", "minimum 1")]

A reason names a place in the message and a rule of the schema, never a value from the body: the rule's
text comes from the schema (a bound, an allowed set, the definition a pattern belongs to), and a field
the schema does not list is named only when its name is a plain identifier. jsonschema's and pydantic's
own messages are never used: they quote the input.
"""

from __future__ import annotations

__all__ = ["Refusal", "refusal_reasons"]

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from schema.erasure._json import NOT_JSON, load_json_text
from schema.erasure._models import message_adapter
from schema.erasure._schema import MESSAGE_VALIDATOR

# The validator resolves `$ref`s to these very objects: a failing subschema is found by identity.
_DEFINITIONS: dict[int, str] = {
    id(definition): f"$defs/{name}" for name, definition in MESSAGE_VALIDATOR.schema["$defs"].items()
}

# A field name shown in a reason: a plain identifier, never arbitrary text from the body.
_PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
# Keywords whose constraint is a short schema value, shown beside the keyword.
_SHOWN_CONSTRAINT = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minLength", "maxLength")
_MOST_REASONS = 8


@dataclass(frozen=True, slots=True)
class Refusal:
    path: str  # a JSON path into the message: "$", "$.sendNo"
    rule: str  # the schema's rule: "required", "minimum 1", "enum (ACCOUNT, ADDRESS)", "pattern of utcTime"

    def __str__(self) -> str:
        return f"{self.path}: {self.rule}"


def _child(path: str, name: str) -> str:
    return f"{path}.{name}" if _PLAIN_NAME.fullmatch(name) else f"{path}.<field>"


def _definition(error: Any) -> str | None:
    """The `$defs` entry the failing keyword belongs to (`$defs/utcTime` for a time's pattern)."""
    return _DEFINITIONS.get(id(error.schema))


def _schema_reasons(value: object) -> list[Refusal]:
    errors = list(MESSAGE_VALIDATOR.iter_errors(value))
    if isinstance(value, dict) and "type" not in value and errors:
        return [Refusal("$.type", "required")]  # without a type, no definition applies
    reasons: list[Refusal] = []
    for error in _leaves(errors):
        path = error.json_path
        keyword = str(error.validator)
        instance = error.instance
        if keyword == "required" and isinstance(instance, dict):
            reasons += [
                Refusal(_child(path, name), "required")
                for name in error.validator_value
                if name not in instance
            ]
        elif keyword == "additionalProperties" and isinstance(instance, dict):
            listed = set((error.schema.get("properties") or {}).keys())
            extra = [name for name in instance if name not in listed]
            reasons += [
                Refusal(_child(path, str(name)), "unknown field (additionalProperties)") for name in extra
            ]
        elif keyword in ("enum", "const"):
            allowed = error.validator_value if keyword == "enum" else [error.validator_value]
            reasons.append(Refusal(path, f"one of ({', '.join(str(a) for a in allowed)})"))
        elif keyword == "type":
            reasons.append(Refusal(path, f"type {error.validator_value}"))
        elif keyword in _SHOWN_CONSTRAINT:
            reasons.append(Refusal(path, f"{keyword} {error.validator_value}"))
        else:  # pattern, format, not, ...: the keyword and the definition it belongs to
            where = _definition(error)
            reasons.append(Refusal(path, f"{keyword} of {where}" if where else keyword))
    return reasons


def _leaves(errors: Iterable[Any]) -> Iterable[Any]:
    """The errors under a combinator's (anyOf/oneOf) error, in place of it."""
    for error in errors:
        if error.context:
            yield from _leaves(error.context)
        else:
            yield error


def _model_reasons(value: object) -> list[Refusal]:
    """The strict models' refusals where the schema accepts (the twins agree; this is the fallback)."""
    try:
        message_adapter().validate_python(value, by_alias=True, by_name=False)
    except ValidationError as refused:
        details = refused.errors(include_input=False, include_url=False, include_context=False)
    else:
        return []
    reasons = []
    for detail in details:
        path = "$"
        for part in detail["loc"]:
            path = f"{path}[{part}]" if isinstance(part, int) else _child(path, str(part))
        reasons.append(Refusal(path, str(detail["type"])))
    return reasons


def refusal_reasons(body: str | bytes) -> list[Refusal]:
    """Each reason the contract refuses `body` (at most eight, in the schema's order, no repeats); [] for a
    message it accepts. A body that is not JSON text has one reason at "$"."""
    value = load_json_text(body)
    if value is NOT_JSON:
        return [Refusal("$", "not JSON text (strict UTF-8 for bytes)")]
    reasons = _schema_reasons(value) or _model_reasons(value)
    # A value of the wrong type breaks every rule below its type: the type alone is its reason.
    mistyped = {r.path for r in reasons if r.rule.startswith("type ")}
    kept = [r for r in reasons if r.path not in mistyped or r.rule.startswith("type ")]
    unique = list(dict.fromkeys(kept))
    return unique[:_MOST_REASONS]
