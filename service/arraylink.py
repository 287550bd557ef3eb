"""arraylink: the one Array link implementation, used by `POST /{user_id}/processor` and the relinker.

    1. read the user's Active row (strongly consistent), exactly as stored;
    2. resolve the user's primary account at transactions-service (HTTP);
    3. post the processor token for it to Array (HTTP);
    4. write back through SaveIfActive: a whole-item put of exactly the image read in 1 and nothing
       else, conditioned on the row still existing and still being Active.

The row is held across two network calls; a row retired or cancelled in that window must not be written
back (it would return to Active beside the newer row, while its cleanup record still names its account).
A refused write is `ErrEntitlementNotActive`, terminal on both paths: the endpoint answers 404, the
relinker records it and never retries. Array keeps the link either way. With stream fidelity a
successful link writes no stream record (the put changes nothing): its outcome is its record.

Transient failures of either service or the table get bounded retries with backoff inside each call,
then `ServiceUnavailableError`. The processor token is a `SecretStr` from transactions-service to Array:
never logged, never in an error, an outcome or a result.
"""

from __future__ import annotations

__all__ = [
    "ArrayLink",
    "ErrEntitlementNotActive",
    "LinkAttempt",
    "LinkTable",
    "LinkWritten",
    "link_and_record",
]

import logging
from dataclasses import dataclass
from typing import Protocol

from adapters import ArrayAccounts, Transactions
from schema.errors import EntitlementsError
from schema.outcomes import OutcomeKind
from service.dynamo import LowLevelItem, attribute
from service.errors import ErrEntitlementNotActive, ServiceRefusal, ServiceUnavailableError
from service.outcomes import OutcomeRecorder, link_outcome

logger = logging.getLogger(__name__)


class LinkTable(Protocol):
    """The table calls a link makes (`service.dynamo.EntitlementTable` has them)."""

    def active_row(self, user_id: str) -> LowLevelItem: ...
    def save_if_active(self, image: LowLevelItem) -> None: ...


@dataclass(frozen=True)
class LinkWritten:
    """A link that was written back: the Array account the Active row names."""

    array_account_id: str


class ArrayLink:
    """Thread-safe: one instance serves every concurrent request and job."""

    def __init__(self, table: LinkTable, transactions: Transactions, array: ArrayAccounts) -> None:
        self._table = table
        self._transactions = transactions
        self._array = array

    def link(self, user_id: str) -> LinkWritten:
        """Link the user's primary account to their Array account. Raises `UnknownUserError`,
        `ErrEntitlementNotActive` (no Active row, or SaveIfActive refused), `WrongStateError` (no primary
        account), `DownstreamRefusal`, `ServiceUnavailableError`."""
        image = self._table.active_row(user_id)
        account = attribute(image, "arrayAccountId")
        if not account:
            raise ErrEntitlementNotActive("the Active row names no Array account")
        primary = self._transactions.primary_account(user_id)
        self._array.post_processor_token(account, primary.processor_token)
        try:
            self._table.save_if_active(image)
        except ErrEntitlementNotActive as refused:
            refused.array_account_id = account
            raise
        return LinkWritten(array_account_id=account)


@dataclass(frozen=True)
class LinkAttempt:
    """What one link came to, as recorded: its outcome kind and, unless linked, the error."""

    kind: OutcomeKind
    error: EntitlementsError | None = None
    array_account_id: str | None = None


def link_and_record(
    arraylink: ArrayLink,
    recorder: OutcomeRecorder,
    user_id: str,
    *,
    job_id: str,
    delivery: int = 0,
) -> LinkAttempt:
    """Run one link and record its outcome (linked, not_active or failed): the endpoint's and the
    relinker's shared bookkeeping (an unknown user is a failed link, detail `unknown_user`). Never raises
    an `EntitlementsError`: returns it.

    An outcome's identity is (job, kind, attempt): linked and not_active are final for a job (attempt 0,
    whatever the delivery), a failed outcome is one per `delivery` of the job."""
    account: str | None = None
    error: EntitlementsError | None
    detail: str | None
    try:
        account = arraylink.link(user_id).array_account_id
    except ErrEntitlementNotActive as refused:
        kind, error, detail = OutcomeKind.LINK_NOT_ACTIVE, refused, refused.reason
        account = refused.array_account_id
    except (ServiceRefusal, ServiceUnavailableError) as failed:
        kind, error, detail = OutcomeKind.LINK_FAILED, failed, failed.code
    except EntitlementsError as failed:  # the table refused or failed (AWS error codes)
        kind, error, detail = OutcomeKind.LINK_FAILED, failed, getattr(failed, "code", type(failed).__name__)
    else:
        kind, error, detail = OutcomeKind.LINK_LINKED, None, None
    recorder.record(
        link_outcome(
            kind,
            job_id=job_id,
            user_id=user_id,
            array_account_id=account,
            occurred_at=recorder.now(),
            attempt=delivery if kind is OutcomeKind.LINK_FAILED else 0,
            detail=detail,
        )
    )
    return LinkAttempt(kind, error, account)
