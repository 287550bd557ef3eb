"""Idempotency-Key: a retried request returns the first answer, never a second effect.

A client may send `Idempotency-Key: <1 to 255 visible ASCII characters>` on any write route. The key's
record sits in the user's partition (`IDEMPOTENCY#<sha256 of the key>`, `schema.table.IdempotencyRecord`),
so the key is per user and an erasure takes it with the user's other items. It is claimed with a
conditional put before the request runs and holds the request's answer once it has one:

- a new key: claimed (responseStatus 0, in flight), the request runs, its answer is stored (status and
  JSON body) and kept until the record's ttl (`ttl_hours`, then DynamoDB's TTL removes it: that removal
  is not a cleanup's and triggers nothing);
- the same key again, for the same route, answered: the stored answer, replayed (`Idempotent-Replayed:
  true`), nothing run;
- the same key for another route: 422 `idempotency_key_reused`, nothing run;
- the same key while the first request is still in flight: 409 `concurrent_request`;
- a first request that failed transiently (an answer of 500 or more, safe to retry) releases the key, so
  the retry runs; one whose process died holding the claim is taken over after `stale_after_seconds`.

DynamoDB's own `ClientRequestToken` covers one TransactWriteItems for ten minutes, not a request's Array
call, and moto ignores it: the records here are what make a request idempotent. The key is never
logged, nor stored in clear.
"""

from __future__ import annotations

__all__ = ["IDEMPOTENCY_KEY_PATTERN", "Claim", "Idempotency", "Replay"]

import hashlib
from dataclasses import dataclass
from datetime import timedelta

from schema.clock import Clock
from schema.table import idempotency_key
from schema.table_writes import (
    IDEMPOTENCY_IN_FLIGHT,
    IDEMPOTENCY_RELEASED,
    attribute,
    business_time,
    idempotency_answer,
    idempotency_claim,
    ttl_after,
)
from service.dynamo import EntitlementTable
from service.errors import ConcurrentRequestError, IdempotencyKeyReusedError

IDEMPOTENCY_KEY_PATTERN = r"^[\x21-\x7e]{1,255}$"


@dataclass(frozen=True)
class Claim:
    """This request holds the key: run it, then `finish` with its answer."""

    key_digest: str
    created_at: str


@dataclass(frozen=True)
class Replay:
    """The first request's answer, to return as it was."""

    status: int
    body: str


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class Idempotency:
    """Thread-safe (the table client is); every decision is a condition on the key's record, so it holds
    across service processes."""

    def __init__(
        self, table: EntitlementTable, clock: Clock, *, ttl_hours: int = 24, stale_after_seconds: float = 60.0
    ) -> None:
        self._table = table
        self._clock = clock
        self._ttl_seconds = ttl_hours * 3600
        self._stale_after = timedelta(seconds=stale_after_seconds)

    def begin(self, user_id: str, key: str, route: str, *, again: bool = True) -> Claim | Replay:
        """Claim `key` for this request (`route` names the request), or the first answer. Raises
        `IdempotencyKeyReusedError` (another route) and `ConcurrentRequestError` (still in flight)."""
        key_digest, request_digest = _digest(key), _digest(route)
        now = self._clock.now()
        ttl = ttl_after(now, 0) + self._ttl_seconds  # epoch seconds, as DynamoDB's TTL reads them
        claim = idempotency_claim(
            self._table.table_name,
            user_id,
            key_digest,
            request_digest,
            ttl=ttl,
            now=now,
            stale_before=now - self._stale_after,
        )
        if self._table.put_if(claim):
            return Claim(key_digest, business_time(now))
        held = self._table.read_item(idempotency_key(user_id, key_digest))
        if held is None:  # its ttl took it between the two calls: claim it afresh, once
            if again:
                return self.begin(user_id, key, route, again=False)
            raise ConcurrentRequestError("the Idempotency-Key's record kept changing: retry the request")
        if attribute(held, "requestDigest") != request_digest:
            raise IdempotencyKeyReusedError("the Idempotency-Key was sent before with another request")
        status = int(held.get("responseStatus", {}).get("N", IDEMPOTENCY_IN_FLIGHT))
        if status in (IDEMPOTENCY_IN_FLIGHT, IDEMPOTENCY_RELEASED):
            raise ConcurrentRequestError("the first request with this Idempotency-Key is still in flight")
        return Replay(status, attribute(held, "responseBody") or "{}")

    def finish(self, user_id: str, claim: Claim, status: int, body: str) -> None:
        """Store the answer (a final one: below 500), or release the key for a retry (500 and above)."""
        stored = IDEMPOTENCY_RELEASED if status >= 500 else status
        self._table.update_if(
            idempotency_answer(
                self._table.table_name,
                user_id,
                claim.key_digest,
                status=stored,
                body=body if status < 500 else "",
                created_at=claim.created_at,
            )
        )
