"""How the service's downstream clients raise the service's own refusals: the HTTP edge's
`adapters.HttpArrayAccounts` and `adapters.HttpTransactions`, built with `errors=SERVICE_ERRORS`, so that
the routes answer them as every other refusal: transient failures past the retries
`ServiceUnavailableError` (503; the relinker lets the job be redelivered), a refusal
`DownstreamRefusal` (502, an `adapters.DownstreamRefusedError` too), transactions-service's "no primary
account" `WrongStateError` (409 `no_primary_account`) and Array's unknown account `DownstreamRefusal`
(`array_user_unknown`). The calls, their retries and the reading of httpx's failures are the edge's.
"""

from __future__ import annotations

__all__ = ["SERVICE_ERRORS"]

import adapters
from schema.errors import EntitlementsError
from service.errors import DownstreamRefusal, ServiceUnavailableError, WrongStateError


def _unavailable(message: str, code: str) -> EntitlementsError:
    return ServiceUnavailableError(message, code=code)


def _refused(message: str, code: str) -> EntitlementsError:
    return DownstreamRefusal(message, code=code)


def _not_found(message: str, code: str) -> EntitlementsError:
    if code == "no_primary_account":  # the user's state, not a fault of the call
        return WrongStateError(message, code=code)
    return DownstreamRefusal(message, code=code)


SERVICE_ERRORS = adapters.DownstreamErrors(unavailable=_unavailable, refused=_refused, not_found=_not_found)
