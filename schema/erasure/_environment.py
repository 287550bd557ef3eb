"""The two settings a store's erasure handler reads from its environment, each held to its cap."""

from __future__ import annotations

__all__ = ["ErasureHandlerEnvironment"]

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar, Self

from schema.erasure._constants import CHANNEL_CONSTANTS
from schema.erasure._errors import ErasureEnvironmentError

_WHOLE_NUMBER = re.compile(r"-?[0-9]+")


def _seconds(environ: Mapping[str, str], name: str, cap: int) -> int:
    raw = environ.get(name)
    if raw is None or raw == "":
        raise ErasureEnvironmentError(f"{name} is not set: give a whole number of seconds from 0 to {cap}")
    if _WHOLE_NUMBER.fullmatch(raw) is None:
        raise ErasureEnvironmentError(f"{name} is not a whole number of seconds (0 to {cap})")
    return _checked(name, int(raw), cap)


def _checked(name: str, value: int, cap: int) -> int:
    if type(value) is not int:
        raise ErasureEnvironmentError(f"{name} must be a whole number of seconds (0 to {cap})")
    if value < 0:
        raise ErasureEnvironmentError(f"{name}={value} is below zero: give 0 to {cap} seconds")
    if value > cap:
        raise ErasureEnvironmentError(f"{name}={value} is above its cap of {cap} seconds")
    return value


@dataclass(frozen=True, slots=True)
class ErasureHandlerEnvironment:
    """A store handler's pass-two delay and batch timeout, in seconds, each within its channel cap
    (passTwoDelayCapSeconds, batchTimeoutCapSeconds). A value above its cap or below zero is refused."""

    PASS_TWO_DELAY_VARIABLE: ClassVar[str] = "ERASURE_PASS_TWO_DELAY_SECONDS"  # noqa: S105 (a name)
    BATCH_TIMEOUT_VARIABLE: ClassVar[str] = "ERASURE_BATCH_TIMEOUT_SECONDS"

    pass_two_delay_seconds: int
    batch_timeout_seconds: int

    def __post_init__(self) -> None:
        _checked(
            self.PASS_TWO_DELAY_VARIABLE,
            self.pass_two_delay_seconds,
            CHANNEL_CONSTANTS.pass_two_delay_cap_seconds,
        )
        _checked(
            self.BATCH_TIMEOUT_VARIABLE,
            self.batch_timeout_seconds,
            CHANNEL_CONSTANTS.batch_timeout_cap_seconds,
        )

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> Self:
        """Read both variables from `environ`. The default, the process environment, mirrors the
        contract's documented API; entry points should pass the mapping they mean."""
        source: Mapping[str, str] = os.environ if environ is None else environ
        return cls(
            pass_two_delay_seconds=_seconds(
                source, cls.PASS_TWO_DELAY_VARIABLE, CHANNEL_CONSTANTS.pass_two_delay_cap_seconds
            ),
            batch_timeout_seconds=_seconds(
                source, cls.BATCH_TIMEOUT_VARIABLE, CHANNEL_CONSTANTS.batch_timeout_cap_seconds
            ),
        )
