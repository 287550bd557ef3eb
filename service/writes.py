"""Signup, cancellation, reactivation and the second Array signup: the service's table writes, as the
service design describes them and `docs/table.md` restates them (every condition, and every deviation
from the design's write shapes, is stated there).

Every write path reads the user's partition once (strongly consistent), guard item first, and makes one
transaction that requires the guard version it read and writes the next (`schema.table_writes.
guard_update`). Of concurrent requests for one user, in one service process or several, one commits;
every other is refused by DynamoDB itself: no lock, no in-process mutex. So at most one row is Active
and every account that stops being Active gets its cleanup record in the same transaction.

- signup: the user is created at Array, then the guard + a fresh Active row (the design's "single
  unconditional write" let two concurrent signups both write one). Every account Array creates is
  recorded first (outcome `array.account_created`), so an account left with no row by a failed write is
  an audit finding (analytics/sql/audits/array_account_without_row.sql, after the outcome grace).
- cancellation: the guard + the Active row Cancelled + the cancellation record (ttl = now +
  CLEANUP_TTL_DAYS, on the user's single cancellation key, naming the account). A record naming another
  account (left by the earlier service's refused retire) is never replaced silently: that account moves
  to its stale key (ttl = now + STALE_ENTITLEMENT_TTL_DAYS) in the same transaction.
- reactivation: the guard + the cancellation record deleted (the only delete the service's write paths
  perform) + the row it names Active again.
- second Array signup: Array is asked for an account; the account the user already holds returns at once
  and writes nothing. Otherwise: the guard + the new Active row + the superseded row retired + a stale
  cleanup record on the key ending in the old account id (ttl = now + STALE_ENTITLEMENT_TTL_DAYS).

A request that loses the guard: cancellation and reactivation (nothing done outside the table) read
again and act on what they find (a state refusal once the other request made the operation moot); a
signup or second signup (Array created an account for it) is answered 409 `concurrent_request`, and the
account it created is scheduled on its stale key (outcome `signup.race_lost`), so only cleanup, through
its in-use guard, ever deletes it at Array, unless a row names that account (Array answered the same
account to the concurrent request: then it is the user's and the request's answer is that account).
"""

from __future__ import annotations

__all__ = ["EntitlementService", "SignupResult"]

import logging
import threading
import uuid
from dataclasses import dataclass

from adapters import ArrayAccounts
from config import PolicySettings
from schema.clock import Clock
from schema.errors import EntitlementsError
from schema.outcomes import OutcomeEvent, OutcomeKind, outcome_id
from schema.table import EntitlementStatus
from service import dynamo
from service.dynamo import EntitlementTable, TransactionRefusedError, UserItems, attribute
from service.errors import ConcurrentRequestError, ServiceUnavailableError, UnknownUserError, WrongStateError
from service.outcomes import OutcomeRecorder

logger = logging.getLogger(__name__)

# Reads of the user's items a cancellation or reactivation makes while concurrent writes keep moving the
# guard; then it answers 409 concurrent_request.
_CANCEL_READS = 3


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

    @property
    def table(self) -> EntitlementTable:
        return self._table

    @property
    def clock(self) -> Clock:
        return self._clock

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
        now = self._clock.now()
        row = dynamo.entitlement_row(user_id, account, now=now)
        transaction = dynamo.signup_transaction(
            self._table.table_name, user_id, row, guard_version=items.guard_version, now=now
        )
        try:
            self._table.transact(transaction)
        except TransactionRefusedError:
            return self._lost_race(user_id, account, by="signup")
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

        The user's cancellation record may name another account already: the earlier, unguarded
        service's second signup whose retire was refused kept its new row beside the record of the row a
        cancellation had just cancelled. That account is then scheduled on its stale key in the same
        transaction (the record's put requires the record to still name it), so a cancellation never
        takes away an account's cleanup schedule. A transaction refused (the guard moved: another write
        for the user came first) is read again and decided afresh."""
        attempt: tuple[str, str] | None = None  # (token, account) of a transaction refused on its retry
        for _ in range(_CANCEL_READS):
            items = self._table.user_items(user_id)
            if attempt is not None and items.guard_token == attempt[0]:  # it landed, its answer lost
                self._count("cancellation")
                return attempt[1]
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
                guard_version=items.guard_version,
                token=(token := uuid.uuid4().hex),
            )
            try:
                self._table.transact(transaction)
            except TransactionRefusedError:
                attempt = (token, account)
                continue  # another write for the user came first: read again (the row may be gone)
            self._count("cancellation")
            if displacing is not None:
                self._count("cancellation_displaced_to_stale")
                logger.info("cancellation moved the earlier cancelled account's schedule to its stale key")
            return account
        raise ConcurrentRequestError("concurrent requests for the user kept changing its rows: retry it")

    def reactivate(self, user_id: str) -> str:
        """Reactivate the row the user's cancellation record names; returns its account."""
        attempt: tuple[str, str] | None = None  # (token, account) of a transaction refused on its retry
        for _ in range(_CANCEL_READS):
            items = self._table.user_items(user_id)
            if attempt is not None and items.guard_token == attempt[0]:  # it landed, its answer lost
                self._count("reactivation")
                return attempt[1]
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
            transaction = dynamo.reactivation_transaction(
                self._table.table_name,
                user_id,
                account,
                now=self._clock.now(),
                guard_version=items.guard_version,
                token=(token := uuid.uuid4().hex),
            )
            try:
                self._table.transact(transaction)
            except TransactionRefusedError as refused:
                attempt = (token, account)
                if (refused.codes or ["?"])[0] in ("None", ""):  # the guard held: the record or row did not
                    raise WrongStateError(
                        "the cancellation record or its Cancelled row changed before the reactivation",
                        code="not_cancelled",
                    ) from None
                continue  # another write for the user came first: read again
            self._count("reactivation")
            return account
        raise ConcurrentRequestError("concurrent requests for the user kept changing its rows: retry it")

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
            guard_version=items.guard_version,
        )
        try:
            self._table.transact(transaction)
        except TransactionRefusedError as refused:
            if refused.codes[:2] == ["None", "ConditionalCheckFailed"]:  # the guard held: the row is there
                raise WrongStateError(
                    "Array answered an account the user holds", code="account_held_before"
                ) from None
            return self._lost_race(user_id, new_account, by="second_signup")
        self._count("second_signup")
        return SignupResult(new_account, written=True, retired=True)

    def _lost_race(self, user_id: str, account: str, *, by: str) -> SignupResult:
        """A signup or second signup whose transaction was refused after Array created `account` for it:
        a concurrent request for the user moved its guard first (or an earlier attempt of this very
        transaction landed unanswered). Returns `account` as written when the user's Active row names it;
        otherwise schedules `account` on its stale key, so only cleanup ever deletes it at Array, and
        raises `ConcurrentRequestError` (409)."""
        items = self._table.user_items(user_id)
        active = items.latest(EntitlementStatus.ACTIVE)
        if active is not None and attribute(active, "arrayAccountId") == account:
            # Our own transaction landed on an attempt whose answer was lost (the retry was then refused
            # by the guard it had moved), or a concurrent twin got the same account from Array: either
            # way the user's Active row is the one this request asked for.
            self._count(f"{by}_found_written")
            return SignupResult(account, written=True, retired=by == "second_signup")
        detail = f"{by}:row_exists"  # a row naming it is the user's: never schedule it
        if account not in items.accounts():
            detail = f"{by}:scheduled_stale"
            now = self._clock.now()
            stale_ttl = dynamo.ttl_after(now, self._policy.stale_entitlement_ttl_days)
            try:
                self._table.transact(
                    dynamo.lost_race_schedule(
                        self._table.table_name, user_id, account, stale_ttl=stale_ttl, now=now
                    )
                )
            except TransactionRefusedError:
                pass  # a row names it now, or it is scheduled already (a replay): nothing to add
            except EntitlementsError as failed:  # the account_created outcome makes it an audit finding
                detail = f"{by}:schedule_failed"
                logger.warning(
                    "lost race schedule failed",
                    extra={"code": getattr(failed, "code", type(failed).__name__)},
                )
        self._race_lost(user_id, account, detail)
        raise ConcurrentRequestError(
            "a concurrent request for the user changed its rows first: read them and retry if still needed"
        )

    def _race_lost(self, user_id: str, account: str, detail: str) -> None:
        kind = OutcomeKind.SIGNUP_RACE_LOST
        self._recorder.record(
            OutcomeEvent(
                outcome_id=outcome_id(f"race-lost|{user_id}|{account}", kind),
                kind=kind,
                occurred_at=self._clock.now(),
                user_id=user_id,
                array_account_id=account,
                detail=detail,
            )
        )
        self._count("race_lost")
        logger.info("request lost the user's guard to a concurrent one", extra={"detail": detail})


def _active_account(items: UserItems, purpose: str) -> str:
    """The Array account of the user's Active row; a user with no row, or no Active row, is refused."""
    if not items.rows:
        raise UnknownUserError("the user has no entitlement row")
    row = items.latest(EntitlementStatus.ACTIVE)
    account = None if row is None else attribute(row, "arrayAccountId")
    if account is None:
        raise WrongStateError(f"the user holds no Active row {purpose}", code="not_active")
    return account
