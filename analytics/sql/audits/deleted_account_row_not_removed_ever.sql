-- audit: deleted_account_row_not_removed_ever
-- scope: ever
-- title: Cleanups that deleted an account but could not mark its row Removed
-- invariant: after cleanup deletes an account it "marks the entitlement row that named it Removed"; that last step is best effort, and `entitlements cleanup repair` closes the gap.
-- remediation: Each is a mark that failed after a delete (detail: the error code). `deleted_account_row_not_removed` lists those still open: `entitlements cleanup repair` closes them. Many at once point at DynamoDB throttling or GSI1 lag.
-- docs: docs/operations/cleanup.md#repair, docs/operations/cleanup.md#marking-the-row-removed
-- time: occurred_at
-- clock: processor
-- Every cleanup.mark_failed outcome: the account was deleted at Array and its row was left as it was
-- (counted even when a repair marked it later).
SELECT user_id, array_account_id, kind, detail, occurred_at, attempt, source_event_id
FROM outcomes
WHERE kind = 'cleanup.mark_failed'
ORDER BY occurred_at, user_id
