"""Parsing a body into a typed message: JSON first, then the strict models and the JSON Schema.

Both validators must accept; the conformance corpus checks that they always agree. Errors are raised
outside any `except` block and `from None`, so neither `__cause__` nor `__context__` carries an
underlying error (a pydantic ValidationError's text quotes the input).
"""

from __future__ import annotations

__all__ = ["is_expired", "parse_erasure_message", "parse_erasure_request", "serialize_erasure_message"]

import json
from datetime import datetime

from pydantic import ValidationError

from schema.erasure._errors import ErasureContractError, ErasureContractErrorCode, ErasureValueError
from schema.erasure._json import NOT_JSON, load_json_text
from schema.erasure._models import (
    CheckRequest,
    ClassifyRequest,
    EraseRequest,
    ErasureMessage,
    ErasureRequest,
    RefileRequest,
    message_adapter,
)
from schema.erasure._schema import MESSAGE_VALIDATOR

_REQUEST_CLASSES = (EraseRequest, RefileRequest, ClassifyRequest, CheckRequest)
# The characters SQS refuses that JSON leaves as themselves (a lone surrogate never gets this far).
_SQS_REFUSED = {0xFFFE: "\\ufffe", 0xFFFF: "\\uffff"}


def _validated(value: object) -> ErasureMessage | None:
    # The models first: they are ~50x cheaper than jsonschema and refuse most bad bodies on their own.
    try:
        message: ErasureMessage = message_adapter().validate_python(value, by_alias=True, by_name=False)
    except ValidationError:
        return None
    if not MESSAGE_VALIDATOR.is_valid(value):
        return None
    return message


def parse_erasure_message(body: str | bytes) -> ErasureMessage:
    """Any valid message, request or answer. Raises ErasureContractError NOT_JSON or INVALID_MESSAGE."""
    value = load_json_text(body)
    if value is NOT_JSON:
        raise ErasureContractError(ErasureContractErrorCode.NOT_JSON) from None
    message = _validated(value)
    if message is None:
        raise ErasureContractError(ErasureContractErrorCode.INVALID_MESSAGE) from None
    return message


def parse_erasure_request(body: str | bytes) -> ErasureRequest:
    """The typed request in `body`, or ErasureContractError with code NOT_JSON, INVALID_MESSAGE or
    NOT_A_REQUEST (a valid answer). Expiry is not judged here: see `is_expired`."""
    message = parse_erasure_message(body)
    if not isinstance(message, _REQUEST_CLASSES):
        raise ErasureContractError(ErasureContractErrorCode.NOT_A_REQUEST) from None
    return message


def is_expired(request: ErasureRequest, now: datetime) -> bool:
    """Whether the request has expired by the store's own clock: at or after `expiresAt`."""
    if now.utcoffset() is None:
        raise ErasureValueError("now must be an aware datetime")
    return now >= request.expires_at


def serialize_erasure_message(message: ErasureMessage) -> str:
    """The message as wire JSON: camelCase, times ending in Z, every character as itself except those
    JSON must escape (quote, backslash, controls) and the two SQS refuses (U+FFFE, U+FFFF), written as
    \\u escapes. So a body holds only characters SQS accepts, and an answer that echoes a key takes no
    more bytes for it than the request did (\\u escapes for all non-ASCII would take up to six times more,
    past SQS's 256 KiB for a long key the contract accepts)."""
    data = message.model_dump(mode="json", by_alias=True, warnings=False)
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return text.translate(_SQS_REFUSED)
