-- audit: guard_refusals
-- scope: ever
-- title: Cleanups refused by the in-use guard
-- invariant: "a record can never name the account in use": a cleanup record schedules the delete of an account no Active row uses. When a record does, cleanup refuses the delete and records `cleanup.refused_by_guard`.
-- remediation: The guard kept an account in use. Settle the cleanup record as `cleanup_names_active_account` says; the refusal itself needs nothing more (a warning by default).
-- docs: docs/operations/cleanup.md#the-in-use-guard-the-designs-order-and-ours
-- time: occurred_at
-- clock: processor
-- Every guard refusal: an expired cleanup record named an Array account an Active row still used.
SELECT user_id, array_account_id, kind, detail, occurred_at, attempt, source_event_id
FROM outcomes
WHERE kind = 'cleanup.refused_by_guard'
ORDER BY occurred_at, user_id
