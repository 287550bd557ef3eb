"""The capability fixtures, read from `schema/erasure-capability-fixtures.json`, and restamping.

Each pair's request is validated through `parse_erasure_request` when loaded, so a fixture the contract
refuses cannot ship.
"""

from __future__ import annotations

__all__ = [
    "CAPABILITY_FIXTURES",
    "CapabilityPair",
    "ErasureCapabilityFixtures",
    "load_capability_fixtures",
    "restamp_expires_at",
]

import json
from datetime import UTC, datetime, timedelta
from typing import Annotated, Literal, Self, TypeVar, cast

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator
from pydantic.alias_generators import to_camel

from schema.erasure._constants import CHANNEL_CONSTANTS
from schema.erasure._errors import ErasureValueError
from schema.erasure._models import ErasureRequest, KeyKind, UtcTime
from schema.erasure._parse import parse_erasure_request
from schema.erasure._resources import CAPABILITY_FIXTURES_FILE, read_text_resource

_R = TypeVar("_R", bound=ErasureRequest)


def _request(value: object) -> object:
    """A fixture's request goes through the contract's own parser."""
    if isinstance(value, dict):
        return parse_erasure_request(json.dumps(value))
    return value


class CapabilityPair(BaseModel):
    """One (type, keyKind) pair a store can implement, and what it answers either way."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True, alias_generator=to_camel)

    type: Literal["erasure/ERASE", "erasure/REFILE", "erasure/CLASSIFY", "erasure/CHECK"]
    key_kind: KeyKind
    request: Annotated[ErasureRequest, BeforeValidator(_request)]
    response_type: Literal["erasure/ACK", "erasure/REFILE_ACK", "erasure/HOLDINGS"]
    outcome_field: Literal["outcome", "answer"]
    outcomes_when_implemented: tuple[str, ...] = Field(min_length=1)
    outcomes_when_not_implemented: tuple[str, ...] = Field(min_length=1)

    @model_validator(mode="after")
    def _request_matches_pair(self) -> Self:
        if self.request.type != self.type or self.request.key_kind != self.key_kind:
            raise ValueError("a pair's request must have the pair's type and keyKind")
        return self


class ErasureCapabilityFixtures(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True, alias_generator=to_camel)

    comment: str | None = Field(default=None, alias="$comment", repr=False)
    expires_at_placeholder: UtcTime
    pairs: tuple[CapabilityPair, ...]


def load_capability_fixtures() -> ErasureCapabilityFixtures:
    text = read_text_resource(CAPABILITY_FIXTURES_FILE)
    return ErasureCapabilityFixtures.model_validate_json(text, by_alias=True, by_name=False)


def restamp_expires_at(request: _R, now: datetime) -> _R:
    """A copy of `request` that expires `expiryPeriodSeconds` (R) after `now`, ready to send."""
    if now.utcoffset() is None:
        raise ErasureValueError("now must be an aware datetime")
    expires_at = now.astimezone(UTC) + timedelta(seconds=CHANNEL_CONSTANTS.expiry_period_seconds)
    return cast(_R, request.model_copy(update={"expires_at": expires_at}))


CAPABILITY_FIXTURES = load_capability_fixtures()
