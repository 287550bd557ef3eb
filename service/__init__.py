"""The entitlements service: its HTTP API (`service.app`), its table writes (`service.writes`,
`service.dynamo`), the one Array link implementation (`service.arraylink`) and the relinker worker
(`service.relinker`). Built from the settings by `entitlements.compose`; served by `entitlements serve`."""

from service.arraylink import ArrayLink, ErrEntitlementNotActive, Linked
from service.errors import (
    DownstreamRefusedError,
    EntitlementNotActiveError,
    ServiceRefusal,
    ServiceUnavailableError,
    UnknownUserError,
    WrongStateError,
)

__all__ = [
    "ArrayLink",
    "DownstreamRefusedError",
    "EntitlementNotActiveError",
    "ErrEntitlementNotActive",
    "Linked",
    "ServiceRefusal",
    "ServiceUnavailableError",
    "UnknownUserError",
    "WrongStateError",
]
