"""The one capability table: what this store does with each (type, keyKind) pair of the contract.

The entitlements table is keyed by user id and holds no addresses, so only the ACCOUNT pairs of ERASE,
CHECK and CLASSIFY are implemented (the ACCOUNT key is the table's user id). Every ADDRESS pair and
REFILE are answered NOT_APPLICABLE at once. Adding a pair later is one change here (plus its work).
"""

from __future__ import annotations

__all__ = ["CAPABILITIES", "Handling", "handling_for", "not_applicable_answer"]

from collections.abc import Mapping
from enum import StrEnum
from types import MappingProxyType

from schema.erasure import (
    CHECK,
    CLASSIFY,
    ERASE,
    REFILE,
    AckResponse,
    CheckRequest,
    ClassifyRequest,
    EraseRequest,
    ErasureRequest,
    ErasureResponse,
    HoldingsResponse,
    RefileAckResponse,
    RefileRequest,
)


class Handling(StrEnum):
    ERASE_ACCOUNT = "erase-account"  # the two-pass erasure, then ACK DONE
    HOLDINGS_ACCOUNT = "holdings-account"  # HOLDS_DATA / HOLDS_NONE / CANNOT_ANSWER
    NOT_APPLICABLE = "not-applicable"  # answered at once, counted in ErasureNotApplicable


CAPABILITIES: Mapping[tuple[str, str], Handling] = MappingProxyType(
    {
        (ERASE, "ACCOUNT"): Handling.ERASE_ACCOUNT,
        (ERASE, "ADDRESS"): Handling.NOT_APPLICABLE,
        (REFILE, "ADDRESS"): Handling.NOT_APPLICABLE,
        (CLASSIFY, "ACCOUNT"): Handling.HOLDINGS_ACCOUNT,
        (CLASSIFY, "ADDRESS"): Handling.NOT_APPLICABLE,
        (CHECK, "ACCOUNT"): Handling.HOLDINGS_ACCOUNT,
        (CHECK, "ADDRESS"): Handling.NOT_APPLICABLE,
    }
)


def handling_for(request: ErasureRequest) -> Handling:
    """What the store does with `request`; a pair missing from the table is not implemented."""
    return CAPABILITIES.get((request.type, request.key_kind), Handling.NOT_APPLICABLE)


def not_applicable_answer(request: ErasureRequest, subscriber: str) -> ErasureResponse:
    """The NOT_APPLICABLE answer of the request's response type, `subscriber` from configuration."""
    if isinstance(request, EraseRequest):
        return AckResponse(
            request_id=request.request_id,
            send_no=request.send_no,
            subscriber=subscriber,
            outcome="NOT_APPLICABLE",
        )
    if isinstance(request, RefileRequest):
        return RefileAckResponse(
            request_id=request.request_id,
            send_no=request.send_no,
            subscriber=subscriber,
            outcome="NOT_APPLICABLE",
        )
    if isinstance(request, CheckRequest | ClassifyRequest):
        return HoldingsResponse(
            request_id=request.request_id,
            subscriber=subscriber,
            key_kind=request.key_kind,
            key=request.key,
            answer="NOT_APPLICABLE",
        )
    raise TypeError("not an erasure request")  # pragma: no cover - the union is exhaustive
