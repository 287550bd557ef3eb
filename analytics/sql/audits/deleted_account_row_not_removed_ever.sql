-- audit: deleted_account_row_not_removed_ever
-- scope: ever
-- title: Cleanups that deleted an account but could not mark its row Removed
-- invariant: after the delete the handler "marks the entitlement row that named it Removed"; "that last step is best effort" (seed 000: the gap it admits).
-- time: occurred_at
-- Every cleanup.mark_failed outcome: the account was deleted at Array and its row was left as it was
-- (counted even when a repair marked it later).
SELECT user_id, array_account_id, kind, detail, occurred_at, attempt, source_event_id
FROM outcomes
WHERE kind = 'cleanup.mark_failed'
ORDER BY occurred_at, user_id
