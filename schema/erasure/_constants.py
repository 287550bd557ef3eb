"""The channel's timing constants, read from `schema/erasure-channel-constants.json`.

No value is written here: the JSON file is the one declaration every twin reads.
"""

from __future__ import annotations

__all__ = ["CHANNEL_CONSTANTS", "ErasureChannelConstants", "load_channel_constants"]

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from schema.erasure._resources import CHANNEL_CONSTANTS_FILE, read_text_resource


class ErasureChannelConstants(BaseModel):
    """One set of limits for every message type (seconds unless the name says otherwise)."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True, alias_generator=to_camel)

    comment: str | None = Field(default=None, alias="$comment", repr=False)
    handler_timeout_cap_seconds: int = Field(gt=0)  # T
    visibility_timeout_multiplier: int = Field(gt=0)
    visibility_timeout_cap_seconds: int = Field(gt=0)  # V, derived: multiplier x T
    max_receive_count: int = Field(gt=0)  # N
    pass_two_delay_cap_seconds: int = Field(gt=0)  # X
    batch_timeout_cap_seconds: int = Field(gt=0)  # b, at most T
    clock_skew_allowance_seconds: int = Field(ge=0)  # S
    expiry_period_seconds: int = Field(gt=0)  # R
    round_publish_bound_seconds: int = Field(gt=0)  # P
    queue_retention_seconds: int = Field(gt=0)
    duplicate_after_completion_window_seconds: int = Field(gt=0)  # derived: R + S + T + b


def load_channel_constants() -> ErasureChannelConstants:
    return ErasureChannelConstants.model_validate_json(read_text_resource(CHANNEL_CONSTANTS_FILE))


CHANNEL_CONSTANTS = load_channel_constants()
