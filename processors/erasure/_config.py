"""The worker's timing settings, held to the channel's caps when it starts.

A store may configure less than a cap, never more (the erasure contract's "The channel constants",
docs/operations/erasure.md). The worker refuses to start, with `ErasureConfigError`, when:
- the handler timeout is above T (handlerTimeoutCapSeconds);
- 6 x the handler timeout (the queue's visibility timeout, visibilityTimeoutMultiplier x handler
  timeout) is not a whole number of seconds, or is above V;
- maxReceiveCount is above N;
- the pass-two delay is above X (and so inside SQS's 900 s DelaySeconds limit);
- the batch timeout is above b, or above the handler timeout (one call cannot outlast the handler).
"""

from __future__ import annotations

__all__ = ["ErasureTimings", "checked_timings"]

import math
from dataclasses import dataclass

from config import ErasureSettings
from processors.erasure._errors import ErasureConfigError
from schema.erasure import CHANNEL_CONSTANTS, ErasureChannelConstants

_SQS_MAX_DELAY_SECONDS = 900
_WHOLE = 1e-9


@dataclass(frozen=True, slots=True)
class ErasureTimings:
    """The checked values the worker and `entitlements erasure setup` use."""

    handler_timeout_seconds: float
    visibility_timeout_seconds: int  # exactly visibilityTimeoutMultiplier x handler timeout
    max_receive_count: int
    pass_two_delay_seconds: int
    batch_timeout_seconds: float


def _above(name: str, value: float, cap: float) -> ErasureConfigError:
    return ErasureConfigError(f"{name}={value:g} is above its cap of {cap:g} seconds or receives")


def checked_timings(
    settings: ErasureSettings, constants: ErasureChannelConstants = CHANNEL_CONSTANTS
) -> ErasureTimings:
    """The settings' timings, or `ErasureConfigError` when one is above its cap (see the module doc)."""
    handler = settings.handler_timeout_seconds
    if not math.isfinite(handler) or handler <= 0:
        raise ErasureConfigError("handler_timeout_seconds must be a positive number of seconds")
    if handler > constants.handler_timeout_cap_seconds:
        raise _above("handler_timeout_seconds", handler, constants.handler_timeout_cap_seconds)
    visibility = constants.visibility_timeout_multiplier * handler
    if abs(visibility - round(visibility)) > _WHOLE or round(visibility) < 1:
        raise ErasureConfigError(
            f"{constants.visibility_timeout_multiplier} x handler_timeout_seconds={handler:g} is not a "
            "whole number of seconds (SQS visibility timeouts are whole seconds)"
        )
    if round(visibility) > constants.visibility_timeout_cap_seconds:
        raise _above("visibility timeout", visibility, constants.visibility_timeout_cap_seconds)
    if settings.max_receive_count > constants.max_receive_count:
        raise _above("max_receive_count", settings.max_receive_count, constants.max_receive_count)
    delay_cap = min(constants.pass_two_delay_cap_seconds, _SQS_MAX_DELAY_SECONDS)
    if settings.pass_two_delay_seconds > delay_cap:
        raise _above("pass_two_delay_seconds", settings.pass_two_delay_seconds, delay_cap)
    batch = settings.batch_timeout_seconds
    if not math.isfinite(batch) or batch <= 0:
        raise ErasureConfigError("batch_timeout_seconds must be a positive number of seconds")
    if batch > constants.batch_timeout_cap_seconds:
        raise _above("batch_timeout_seconds", batch, constants.batch_timeout_cap_seconds)
    if batch > handler:
        raise ErasureConfigError(
            f"batch_timeout_seconds={batch:g} is above handler_timeout_seconds={handler:g}"
        )
    return ErasureTimings(
        handler_timeout_seconds=handler,
        visibility_timeout_seconds=round(visibility),
        max_receive_count=settings.max_receive_count,
        pass_two_delay_seconds=settings.pass_two_delay_seconds,
        batch_timeout_seconds=batch,
    )
