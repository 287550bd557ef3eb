-- audit: removed_without_cleanup
-- scope: now, ever
-- invariant: a row is marked Removed only by cleanup, after DynamoDB's TTL removed the cleanup record naming its account and the account was deleted at Array.
-- docs: docs/operations/cleanup.md#marking-the-row-removed, docs/table.md#statuses
-- clock: stream
-- now.title: Rows Removed with no cleanup behind them
-- now.remediation: The account may still exist at Array while the user lost the row. Check the account at Array: if it exists and the user uses it, set the row back to its earlier status; if it should go, delete it at Array and keep the row Removed. Then find the writer (event_id).
-- now.time: changed_at
-- now: Every entitlement row Removed now whose Array account has neither a cleanup record removed by TTL nor
-- now: a cleanup outcome saying the account was deleted (audit_deleted_outcomes).
-- ever.title: Rows ever made Removed with no cleanup behind them
-- ever.remediation: Check `removed_without_cleanup` for rows still Removed this way, and fix the writer (event_id) that set the status.
-- ever.time: removed_at
-- ever: Every change that turned an entitlement row Removed when its Array account has neither a cleanup
-- ever: record removed by TTL nor a cleanup outcome saying the account was deleted, even if the row changed
-- ever: again later.
WITH cleaned_up AS (
    -- The Array accounts with a cleanup behind them, for both scopes: a cleanup record DynamoDB's TTL
    -- removed, or a cleanup outcome saying the account was deleted.
    SELECT array_account_id FROM cleanup_record_history WHERE deleted AND ttl_deletion
    UNION ALL
    SELECT array_account_id FROM outcomes WHERE list_contains(getvariable('audit_deleted_outcomes'), kind)
),
now_findings AS (
    SELECT e.user_id, e.array_account_id, e.status, e.pk, e.sk, e.item_updated_at, e.changed_at, e.event_id
    FROM entitlements AS e
    WHERE e.status = 'Removed'
        AND NOT EXISTS (SELECT 1 FROM cleaned_up AS c WHERE c.array_account_id = e.array_account_id)
    ORDER BY e.user_id, e.sk
),
ever_findings AS (
    WITH versions AS (
        SELECT
            *,
            lag(status) OVER (PARTITION BY pk, sk ORDER BY sequence_key, stream_arn, shard_id) AS previous_status
        FROM entitlement_history
    )
    SELECT
        v.user_id,
        v.array_account_id,
        v.previous_status,
        v.status,
        v.pk,
        v.sk,
        v.item_updated_at,
        v.valid_from AS removed_at,
        v.event_id
    FROM versions AS v
    WHERE v.status = 'Removed'
        AND NOT v.deleted
        AND v.previous_status IS DISTINCT FROM 'Removed'
        AND NOT EXISTS (SELECT 1 FROM cleaned_up AS c WHERE c.array_account_id = v.array_account_id)
    ORDER BY removed_at, v.pk, v.sk
)
SELECT *
FROM query_table(
    CASE coalesce(getvariable('audit_scope'), 'now')
        WHEN 'now' THEN 'now_findings'
        WHEN 'ever' THEN 'ever_findings'
        ELSE error('audit_scope is now or ever')
    END
)
