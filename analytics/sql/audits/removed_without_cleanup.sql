-- audit: removed_without_cleanup
-- scope: now
-- title: Rows Removed with no cleanup behind them
-- invariant: a row is marked Removed only by cleanup, after DynamoDB's TTL removed the cleanup record naming its account and the account was deleted at Array.
-- remediation: The account may still exist at Array while the user lost the row. Check the account at Array: if it exists and the user uses it, set the row back to its earlier status; if it should go, delete it at Array and keep the row Removed. Then find the writer (event_id).
-- docs: docs/operations/cleanup.md#marking-the-row-removed, docs/table.md#statuses
-- time: changed_at
-- clock: stream
-- Every entitlement row Removed now whose Array account has neither a cleanup record removed by TTL nor
-- a cleanup outcome saying the account was deleted (audit_deleted_outcomes).
SELECT e.user_id, e.array_account_id, e.status, e.pk, e.sk, e.item_updated_at, e.changed_at, e.event_id
FROM entitlements AS e
WHERE e.status = 'Removed'
    AND NOT EXISTS (
        SELECT 1
        FROM cleanup_record_history AS h
        WHERE h.array_account_id = e.array_account_id AND h.deleted AND h.ttl_deletion
    )
    AND NOT EXISTS (
        SELECT 1
        FROM outcomes AS o
        WHERE o.array_account_id = e.array_account_id
            AND list_contains(getvariable('audit_deleted_outcomes'), o.kind)
    )
ORDER BY e.user_id, e.sk
