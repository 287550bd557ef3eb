"""Thresholds and parameters: defaults in analytics/audits/defaults.toml, overridable from a file of the
same shape; the policy's days come from `config.PolicySettings`."""

from __future__ import annotations

__all__ = [
    "DEFAULTS_PATH",
    "AuditConfig",
    "AuditConfigError",
    "AuditParameters",
    "Thresholds",
    "load_config",
]

import tomllib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from config import PolicySettings
from schema.errors import TerminalError

DEFAULTS_PATH = Path(__file__).with_name("defaults.toml")
_FROZEN = ConfigDict(frozen=True, extra="forbid")


class AuditConfigError(TerminalError):
    """A thresholds file that cannot be read or does not fit the expected shape."""


class Thresholds(BaseModel):
    """A check is `error` at `error` findings or more, else `warn` at `warn` or more; None is never."""

    model_config = _FROZEN
    warn: int | None = Field(default=None, ge=1)
    error: int | None = Field(default=None, ge=1)

    @model_validator(mode="after")
    def _ordered(self) -> Thresholds:
        if self.warn is not None and self.error is not None and self.warn > self.error:
            raise ValueError("warn must not exceed error")
        return self


class AuditParameters(BaseModel):
    model_config = _FROZEN
    ttl_tolerance_seconds: int = Field(default=3600, ge=0)
    overlap_tolerance_seconds: float = Field(default=1.0, ge=0)
    outcome_grace_seconds: int = Field(default=3600, ge=0)
    max_rows: int = Field(default=100, ge=0)


class AuditConfig(BaseModel):
    model_config = _FROZEN
    parameters: AuditParameters = AuditParameters()
    checks: dict[str, Thresholds] = Field(default_factory=dict)
    policy: PolicySettings = PolicySettings()

    def thresholds(self, check: str) -> Thresholds:
        """A check's thresholds; a check the configuration does not name is never flagged."""
        return self.checks.get(check, Thresholds())


def _read(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except OSError as error:
        raise AuditConfigError(
            f"cannot read the thresholds file {path} ({type(error).__name__}): give --thresholds an existing "
            "TOML file shaped like analytics/audits/defaults.toml"
        ) from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise AuditConfigError(f"the thresholds file {path} is not valid TOML ({error})") from None


def load_config(
    path: Path | None = None,
    *,
    policy: PolicySettings | None = None,
    known_checks: frozenset[str] | None = None,
) -> AuditConfig:
    """The defaults, with what `path` sets replacing them (parameter by parameter, check by check).

    With `known_checks`, a file naming any other check is refused (a misspelt name would otherwise
    silently leave the real check at its default).
    """
    document = _read(DEFAULTS_PATH)
    if path is not None:
        override = _read(path)
        unexpected = set(override) - {"parameters", "checks"}
        if unexpected:
            raise AuditConfigError(
                f"unexpected sections in the thresholds file {path}: {sorted(unexpected)} "
                "(it has [parameters] and [checks.<name>])"
            )
        if known_checks is not None:
            unknown = set(override.get("checks", {})) - known_checks
            if unknown:
                raise AuditConfigError(
                    f"the thresholds file {path} names unknown checks: {sorted(unknown)} "
                    "(the checks are analytics/sql/audits/*.sql)"
                )
        document = {
            "parameters": {**document.get("parameters", {}), **override.get("parameters", {})},
            "checks": {**document.get("checks", {}), **override.get("checks", {})},
        }
    try:
        return AuditConfig.model_validate({**document, "policy": policy or PolicySettings()})
    except ValidationError as error:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in error.errors())
        raise AuditConfigError(f"invalid thresholds in {path or DEFAULTS_PATH.name}: {problems}") from None
