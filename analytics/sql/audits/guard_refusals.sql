-- audit: guard_refusals
-- scope: ever
-- title: Cleanups refused by the in-use guard
-- invariant: "a record can never name the account in use" (seed 000): when one does, cleanup refuses the delete and records it (cleanup.refused_by_guard).
-- time: occurred_at
-- Every guard refusal: an expired cleanup record named an Array account an Active row still used.
SELECT user_id, array_account_id, kind, detail, occurred_at, attempt, source_event_id
FROM outcomes
WHERE kind = 'cleanup.refused_by_guard'
ORDER BY occurred_at, user_id
