"""Signup, cancellation, reactivation and the second Array signup: the service's table writes, as the
service design describes them and `docs/table.md` restates them (every condition is stated there).

- signup: the user is created at Array, then one unconditional put of a fresh Active row. A put that
  fails answers 503 and the request is safe to retry (a user already holding an Active row gets it back,
  nothing written). Every account Array creates is recorded first (outcome `array.account_created`,
  landed in the lake with the service's other outcomes), so an account left with no row by a failed put
  is an audit finding (analytics/sql/audits/array_account_without_row.sql, after the outcome grace).
- cancellation: the Active row Cancelled and the cancellation record (ttl = now + CLEANUP_TTL_DAYS, on
  the user's single cancellation key, naming the account), in one transaction. A record naming another
  account (left beside the new row by a refused retire) is never replaced silently: that account moves
  to its stale key (ttl = now + STALE_ENTITLEMENT_TTL_DAYS) in the same transaction.
- reactivation: the cancellation record deleted (the only delete the service's write paths perform) and
  the row it names Active again, in one transaction.
- second Array signup: Array is asked for an account; the account the user already holds returns at once
  and writes nothing. Otherwise, in one transaction: the new Active row, the superseded row retired and a
  stale cleanup record on the key ending in the old account id (ttl = now + STALE_ENTITLEMENT_TTL_DAYS).
  If the retire (or its stale record) is refused, the new row is written alone and the refusal is an
  outcome: the new row is never lost, and the old account keeps its row (and whatever cleanup record
  the change that beat us wrote).
"""

from __future__ import annotations

__all__ = ["EntitlementService", "SignupResult"]

import logging
import threading
import uuid
from dataclasses import dataclass

from config import PolicySettings
from pipeline.clock import Clock
from schema.errors import EntitlementsError
from schema.outcomes import OutcomeEvent, OutcomeKind, outcome_id
from schema.table import EntitlementStatus
from service import dynamo
from service.clients import ArrayAccounts
from service.dynamo import EntitlementTable, TransactionRefusedError, UserItems, attribute
from service.errors import ServiceUnavailableError, UnknownUserError, WrongStateError
from service.outcomes import OutcomeRecorder

logger = logging.getLogger(__name__)

_CANCEL_READS = 3  # reads of the user's items a cancellation makes while its record keeps changing


@dataclass(frozen=True)
class SignupResult:
    """The account the user's Active row names after a signup or a second signup.

    `written`: whether this request wrote anything (False: the user already held the account).
    `retired`: for a second signup, whether the superseded row was retired with it."""

    array_account_id: str
    written: bool
    retired: bool = False


class EntitlementService:
    """Thread-safe: one instance serves every concurrent request."""

    def __init__(
        self,
        table: EntitlementTable,
        array: ArrayAccounts,
        clock: Clock,
        policy: PolicySettings,
        recorder: OutcomeRecorder,
    ) -> None:
        self._table = table
        self._array = array
        self._clock = clock
        self._policy = policy
        self._recorder = recorder
        self._lock = threading.Lock()
        self.counts: dict[str, int] = {}

    def snapshot(self) -> dict[str, int]:
        """The writes by kind, copied under the lock."""
        with self._lock:
            return dict(self.counts)

    def _count(self, name: str) -> None:
        with self._lock:
            self.counts[name] = self.counts.get(name, 0) + 1

    # -- signup -------------------------------------------------------------------------------------

    def signup(self, user_id: str) -> SignupResult:
        items = self._table.user_items(user_id)
        held = items.latest(EntitlementStatus.ACTIVE)
        if held is not None:  # a retry of a signup that landed: nothing to do
            self._count("signup_already_active")
            return SignupResult(attribute(held, "arrayAccountId") or "", written=False)
        if items.rows:
            raise WrongStateError(
                "the user has signed up before and holds no Active row", code="signed_up_before"
            )
        account = self._array.create_user(user_id)
        self._account_created(user_id, account, by="signup")
        row = dynamo.entitlement_row(user_id, account, now=self._clock.now())
        try:
            self._table.put_row(row)
        except EntitlementsError as failed:
            logger.warning(  # the account_created outcome makes the account without a row a finding
                "signup put failed", extra={"code": getattr(failed, "code", type(failed).__name__)}
            )
            raise ServiceUnavailableError(
                "the signup was not written: retry it", code="signup_not_written"
            ) from None
        self._count("signup")
        return SignupResult(account, written=True)

    def _account_created(self, user_id: str, account: str, *, by: str) -> None:
        """Record that Array created `account` for the user, before the write that names it: if that
        write never lands, the audit finds the account with no row. Its identity is (user, account), so
        a retried signup answered the same account records it once."""
        kind = OutcomeKind.ARRAY_ACCOUNT_CREATED
        self._recorder.record(
            OutcomeEvent(
                outcome_id=outcome_id(f"array-account|{user_id}|{account}", kind),
                kind=kind,
                occurred_at=self._clock.now(),
                user_id=user_id,
                array_account_id=account,
                detail=by,
            )
        )

    # -- cancellation and reactivation --------------------------------------------------------------

    def cancel(self, user_id: str) -> str:
        """Cancel the user's Active row; returns the account the cancellation record names.

        The user's cancellation record may name another account already: a second signup whose retire
        was refused kept its new row beside the record of the row a cancellation had just cancelled.
        That account is then scheduled on its stale key in the same transaction (the record's put
        requires the record to still name it), so a cancellation never takes away an account's cleanup
        schedule. A record that changed between the read and the write is read again."""
        for _ in range(_CANCEL_READS):
            items = self._table.user_items(user_id)
            account = _active_account(items, "to cancel")
            held = None if items.cancellation is None else attribute(items.cancellation, "arrayAccountId")
            displacing = held if held and held != account else None
            now = self._clock.now()
            transaction = dynamo.cancellation_transaction(
                self._table.table_name,
                user_id,
                account,
                ttl=dynamo.ttl_after(now, self._policy.cleanup_ttl_days),
                now=now,
                displacing=displacing,
                stale_ttl=dynamo.ttl_after(now, self._policy.stale_entitlement_ttl_days)
                if displacing
                else None,
            )
            try:
                self._table.transact(transaction)
            except TransactionRefusedError as refused:
                if (refused.codes or ["?"])[0] not in ("None", ""):  # the row's own: no longer Active
                    raise WrongStateError(
                        "the row stopped being Active before the cancellation", code="not_active"
                    ) from None
                continue  # only the cancellation record changed since the read: read again
            self._count("cancellation")
            if displacing is not None:
                self._count("cancellation_displaced_to_stale")
                logger.info("cancellation moved the earlier cancelled account's schedule to its stale key")
            return account
        raise WrongStateError(
            "the cancellation record kept changing during the cancellation: retry it",
            code="cancellation_changed",
        )

    def reactivate(self, user_id: str) -> str:
        """Reactivate the row the user's cancellation record names; returns its account."""
        items = self._table.user_items(user_id)
        if not items.rows:
            raise UnknownUserError("the user has no entitlement row")
        if items.latest(EntitlementStatus.ACTIVE) is not None:
            raise WrongStateError("the user holds an Active row already", code="already_active")
        record = items.cancellation
        account = None if record is None else attribute(record, "arrayAccountId")
        if account is None:
            raise WrongStateError(
                "no cancellation record: it expired and cleanup owns the account", code="no_cancellation"
            )
        try:
            self._table.transact(
                dynamo.reactivation_transaction(
                    self._table.table_name, user_id, account, now=self._clock.now()
                )
            )
        except TransactionRefusedError:
            raise WrongStateError(
                "the cancellation record or its Cancelled row changed before the reactivation",
                code="not_cancelled",
            ) from None
        self._count("reactivation")
        return account

    # -- second Array signup ------------------------------------------------------------------------

    def second_signup(self, user_id: str) -> SignupResult:
        items = self._table.user_items(user_id)
        old_account = _active_account(items, "to supersede")
        new_account = self._array.create_user(user_id)
        if new_account == old_account:  # the same account arriving again: nothing to write
            self._count("second_signup_same_account")
            return SignupResult(old_account, written=False)
        if new_account in items.accounts():  # never overwrite a row (nor revive its account)
            raise WrongStateError(
                "Array answered an account the user held before", code="account_held_before"
            )
        self._account_created(user_id, new_account, by="second_signup")
        now = self._clock.now()
        new_row = dynamo.entitlement_row(user_id, new_account, now=now)
        stale_ttl = dynamo.ttl_after(now, self._policy.stale_entitlement_ttl_days)
        transaction = dynamo.second_signup_transaction(
            self._table.table_name,
            user_id,
            old_array_account_id=old_account,
            new_row=new_row,
            stale_ttl=stale_ttl,
            now=now,
        )
        try:
            self._table.transact(transaction)
        except TransactionRefusedError as refused:
            if refused.codes[:1] == ["ConditionalCheckFailed"]:  # the new account's row exists already
                raise WrongStateError(
                    "Array answered an account the user holds", code="account_held_before"
                ) from None
            return self._keep_new_row(user_id, old_account, new_account, new_row, refused.codes)
        self._count("second_signup")
        return SignupResult(new_account, written=True, retired=True)

    def _keep_new_row(
        self, user_id: str, old_account: str, new_account: str, new_row: dynamo.LowLevelItem, codes: list[str]
    ) -> SignupResult:
        """The retire was refused (the old row changed meanwhile): the new row is written alone and the
        refusal recorded. The old account still has its row, so it is never left with neither a row nor
        a cleanup record."""
        try:
            self._table.put_new_row(new_row)
        except TransactionRefusedError:
            raise WrongStateError(
                "Array answered an account the user holds", code="account_held_before"
            ) from None
        self._recorder.record(
            OutcomeEvent(
                outcome_id=outcome_id(uuid.uuid4().hex, OutcomeKind.SECOND_SIGNUP_RETIRE_REFUSED),
                kind=OutcomeKind.SECOND_SIGNUP_RETIRE_REFUSED,
                occurred_at=self._clock.now(),
                user_id=user_id,
                array_account_id=old_account,
                detail="+".join(code for code in codes[1:] if code not in ("None", "")) or "refused",
            )
        )
        self._count("second_signup_retire_refused")
        logger.info("second signup kept the new row alone: the retire was refused")
        return SignupResult(new_account, written=True, retired=False)


def _active_account(items: UserItems, purpose: str) -> str:
    """The Array account of the user's Active row; a user with no row, or no Active row, is refused."""
    if not items.rows:
        raise UnknownUserError("the user has no entitlement row")
    row = items.latest(EntitlementStatus.ACTIVE)
    account = None if row is None else attribute(row, "arrayAccountId")
    if account is None:
        raise WrongStateError(f"the user holds no Active row {purpose}", code="not_active")
    return account
