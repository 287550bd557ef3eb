"""The contract's seven message types as strict pydantic v2 models.

These are the second, independent validator beside the JSON Schema: the rules below are written in
Python, not read from the schema, and the conformance corpus checks that both give the same verdict.

Fields are snake_case in Python and camelCase on the wire (`from` is `from_`). Validation from the wire
goes through aliases only (`by_name=False`), so `request_id` in a body is an unknown field, as it is to
the schema. Python code may build a model with either spelling.
"""

from __future__ import annotations

__all__ = [
    "ACK",
    "CHECK",
    "CLASSIFY",
    "ERASE",
    "HOLDINGS",
    "REFILE",
    "REFILE_ACK",
    "REQUEST_TYPES",
    "RESPONSE_TYPES",
    "SEND_NO_MAX",
    "AckOutcome",
    "AckResponse",
    "CheckRequest",
    "ClassifyRequest",
    "EraseRequest",
    "ErasureMessage",
    "ErasureRequest",
    "ErasureResponse",
    "HoldingsAnswer",
    "HoldingsResponse",
    "KeyKind",
    "RefileAckOutcome",
    "RefileAckResponse",
    "RefileRequest",
    "format_utc_time",
    "message_adapter",
    "response_adapter",
]

import re
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, Final, Literal, Protocol, TypeAlias, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    StringConstraints,
    TypeAdapter,
    model_validator,
)

from schema.erasure._address import address_key

ERASE: Final = "erasure/ERASE"
REFILE: Final = "erasure/REFILE"
CLASSIFY: Final = "erasure/CLASSIFY"
CHECK: Final = "erasure/CHECK"
ACK: Final = "erasure/ACK"
REFILE_ACK: Final = "erasure/REFILE_ACK"
HOLDINGS: Final = "erasure/HOLDINGS"
REQUEST_TYPES: Final = frozenset({ERASE, REFILE, CLASSIFY, CHECK})
RESPONSE_TYPES: Final = frozenset({ACK, REFILE_ACK, HOLDINGS})

# Our reading (see the schema's $comment): a signed 32-bit integer, exact in every twin.
SEND_NO_MAX: Final = 2_147_483_647

KeyKind: TypeAlias = Literal["ACCOUNT", "ADDRESS"]
AckOutcome: TypeAlias = Literal["DONE", "NOT_APPLICABLE"]
RefileAckOutcome: TypeAlias = Literal["MOVED", "NONE_OWNED", "NOT_MOVED", "NOT_APPLICABLE"]
HoldingsAnswer: TypeAlias = Literal["HOLDS_DATA", "HOLDS_NONE", "CANNOT_ANSWER", "NOT_APPLICABLE"]

# YYYY-MM-DDTHH:MM:SS[.fraction]Z, ASCII digits only; ranges are left to datetime() below.
_UTC_TIME = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.([0-9]+))?Z")


def _utc_time(value: object) -> object:
    """A wire time (str) becomes an aware UTC datetime; anything else but an aware UTC datetime fails."""
    if isinstance(value, str):
        match = _UTC_TIME.fullmatch(value)
        if match is None:
            raise ValueError("not an ISO-8601 UTC time with seconds, ending in Z")
        year, month, day, hour, minute, second, fraction = match.groups()
        microsecond = int((fraction or "")[:6].ljust(6, "0"))
        # datetime() refuses month 13, 30 February, hour 24, second 60 and year 0.
        return datetime(
            int(year), int(month), int(day), int(hour), int(minute), int(second), microsecond, tzinfo=UTC
        )
    if isinstance(value, datetime):
        if value.utcoffset() != timedelta(0):
            raise ValueError("must be an aware UTC datetime")
        return value.astimezone(UTC)
    return value  # the strict datetime check refuses it


def format_utc_time(value: datetime) -> str:
    """As JavaScript's toISOString writes it (milliseconds, Z), or with microseconds when there are any."""
    value = value.astimezone(UTC)
    timespec = "milliseconds" if value.microsecond % 1000 == 0 else "microseconds"
    return value.replace(tzinfo=None).isoformat(timespec=timespec) + "Z"


def _integral_number(value: object) -> object:
    """JSON Schema (and JavaScript) count 1.0 as the integer 1: so do we, and only for integral floats."""
    if type(value) is float and value.is_integer():
        return int(value)
    return value


# A str from JSON holds a surrogate only where the text had a lone-surrogate escape (the decoder joins
# every escaped pair into one character).
_SURROGATE = re.compile("[\ud800-\udfff]")


def _well_formed(value: str) -> str:
    """No lone surrogate: the schema's `text` rule (JSON.parse reads one, System.Text.Json does not)."""
    if not value.isascii() and _SURROGATE.search(value) is not None:
        raise ValueError("a string holds no lone surrogate")
    return value


def _no_ascii_upper(value: str) -> str:
    if address_key(value) != value:
        raise ValueError("an address contains no A to Z")
    return value


UtcTime = Annotated[
    datetime,
    BeforeValidator(_utc_time),
    PlainSerializer(format_utc_time, return_type=str, when_used="json"),
]
SendNo = Annotated[int, BeforeValidator(_integral_number), Field(ge=1, le=SEND_NO_MAX)]
NonEmpty = Annotated[str, StringConstraints(min_length=1), AfterValidator(_well_formed)]
Address = Annotated[
    str, StringConstraints(min_length=1), AfterValidator(_well_formed), AfterValidator(_no_ascii_upper)
]


class _KeyedMessage(Protocol):
    @property
    def key_kind(self) -> KeyKind: ...
    @property
    def key(self) -> str: ...


_K = TypeVar("_K", bound=_KeyedMessage)


class _Message(BaseModel):
    model_config = ConfigDict(
        strict=True,
        extra="forbid",
        frozen=True,
        validate_by_alias=True,
        validate_by_name=True,
        serialize_by_alias=True,
    )


def _address_key_rule(message: _K) -> _K:
    """When keyKind is ADDRESS, the key is an address: it contains no A to Z."""
    if message.key_kind == "ADDRESS":
        _no_ascii_upper(message.key)
    return message


class EraseRequest(_Message):
    type: Literal["erasure/ERASE"] = ERASE
    request_id: NonEmpty = Field(alias="requestId")
    send_no: SendNo = Field(alias="sendNo")
    expires_at: UtcTime = Field(alias="expiresAt")
    key_kind: KeyKind = Field(alias="keyKind")
    key: NonEmpty

    _check_address_key = model_validator(mode="after")(_address_key_rule)


class RefileRequest(_Message):
    type: Literal["erasure/REFILE"] = REFILE
    request_id: NonEmpty = Field(alias="requestId")
    send_no: SendNo = Field(alias="sendNo")
    expires_at: UtcTime = Field(alias="expiresAt")
    key_kind: Literal["ADDRESS"] = Field(alias="keyKind")
    from_: Address = Field(alias="from")
    to: Address
    account_id: NonEmpty = Field(alias="accountId")


class ClassifyRequest(_Message):
    type: Literal["erasure/CLASSIFY"] = CLASSIFY
    request_id: NonEmpty = Field(alias="requestId")
    expires_at: UtcTime = Field(alias="expiresAt")
    key_kind: KeyKind = Field(alias="keyKind")
    key: NonEmpty

    _check_address_key = model_validator(mode="after")(_address_key_rule)


class CheckRequest(_Message):
    type: Literal["erasure/CHECK"] = CHECK
    request_id: NonEmpty = Field(alias="requestId")
    expires_at: UtcTime = Field(alias="expiresAt")
    key_kind: KeyKind = Field(alias="keyKind")
    key: NonEmpty

    _check_address_key = model_validator(mode="after")(_address_key_rule)


class AckResponse(_Message):
    type: Literal["erasure/ACK"] = ACK
    request_id: NonEmpty = Field(alias="requestId")
    send_no: SendNo = Field(alias="sendNo")
    subscriber: NonEmpty
    outcome: AckOutcome


class RefileAckResponse(_Message):
    type: Literal["erasure/REFILE_ACK"] = REFILE_ACK
    request_id: NonEmpty = Field(alias="requestId")
    send_no: SendNo = Field(alias="sendNo")
    subscriber: NonEmpty
    outcome: RefileAckOutcome


class HoldingsResponse(_Message):
    type: Literal["erasure/HOLDINGS"] = HOLDINGS
    request_id: NonEmpty = Field(alias="requestId")
    subscriber: NonEmpty
    key_kind: KeyKind = Field(alias="keyKind")
    key: NonEmpty
    answer: HoldingsAnswer

    _check_address_key = model_validator(mode="after")(_address_key_rule)


ErasureRequest: TypeAlias = EraseRequest | RefileRequest | ClassifyRequest | CheckRequest
ErasureResponse: TypeAlias = AckResponse | RefileAckResponse | HoldingsResponse
ErasureMessage: TypeAlias = ErasureRequest | ErasureResponse

_MESSAGE_ADAPTER: TypeAdapter[Any] = TypeAdapter(Annotated[ErasureMessage, Field(discriminator="type")])
_RESPONSE_ADAPTER: TypeAdapter[Any] = TypeAdapter(Annotated[ErasureResponse, Field(discriminator="type")])


def message_adapter() -> TypeAdapter[Any]:
    """Validates any message (a discriminated union on `type`); call with by_alias=True, by_name=False."""
    return _MESSAGE_ADAPTER


def response_adapter() -> TypeAdapter[Any]:
    """Validates answers only."""
    return _RESPONSE_ADAPTER
