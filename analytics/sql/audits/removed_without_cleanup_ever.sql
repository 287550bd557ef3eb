-- audit: removed_without_cleanup_ever
-- scope: ever
-- title: Rows ever made Removed with no cleanup behind them
-- invariant: a row is marked Removed only by cleanup, after DynamoDB's TTL removed the cleanup record naming its account and the account was deleted at Array.
-- remediation: Check `removed_without_cleanup` for rows still Removed this way, and fix the writer (event_id) that set the status.
-- docs: docs/operations/cleanup.md#marking-the-row-removed, docs/table.md#statuses
-- time: removed_at
-- clock: stream
-- Every change that turned an entitlement row Removed when its Array account has neither a cleanup
-- record removed by TTL nor a cleanup outcome saying the account was deleted, even if the row changed
-- again later.
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
    AND NOT EXISTS (
        SELECT 1
        FROM cleanup_record_history AS h
        WHERE h.array_account_id = v.array_account_id AND h.deleted AND h.ttl_deletion
    )
    AND NOT EXISTS (
        SELECT 1
        FROM outcomes AS o
        WHERE o.array_account_id = v.array_account_id
            AND list_contains(getvariable('audit_deleted_outcomes'), o.kind)
    )
ORDER BY removed_at, v.pk, v.sk
