-- array_accounts: one row per Array account id named by an entitlement row or a cleanup record, ever:
-- who it belongs to, its row's status now, its cleanup record now and in the past, and what the cleanup
-- did at Array. Column meanings (and the views' COMMENTs): schema/lake.md, "Column meanings".
CREATE OR REPLACE VIEW array_accounts AS
WITH linked AS (
    SELECT
        array_account_id,
        min(user_id) AS user_id,
        count(DISTINCT user_id) AS user_count,
        min(valid_from) AS first_linked_at
    FROM entitlement_history
    WHERE array_account_id IS NOT NULL
    GROUP BY array_account_id
),
rows_now AS (
    SELECT array_account_id, min(status) AS entitlement_status, count(*) AS entitlement_rows
    FROM entitlements
    WHERE array_account_id IS NOT NULL
    GROUP BY array_account_id
),
scheduled AS (
    SELECT
        array_account_id,
        min(user_id) AS user_id,
        min(valid_from) FILTER (WHERE NOT deleted) AS cleanup_first_scheduled_at,
        min(valid_from) FILTER (WHERE deleted AND ttl_deletion) AS cleanup_expired_at,
        min(valid_from) FILTER (WHERE deleted AND NOT ttl_deletion) AS cleanup_cancelled_at
    FROM cleanup_record_history
    WHERE array_account_id IS NOT NULL
    GROUP BY array_account_id
),
pending AS (
    SELECT
        array_account_id,
        min(cleanup_kind) AS pending_cleanup_kind,
        min(expires_at) AS pending_cleanup_expires_at
    FROM cleanup_records
    WHERE array_account_id IS NOT NULL
    GROUP BY array_account_id
),
results AS (
    SELECT
        array_account_id,
        arg_max(kind, occurred_at) AS last_outcome,
        max(occurred_at) AS last_outcome_at,
        bool_or(kind IN ('cleanup.deleted', 'cleanup.already_deleted')) AS array_account_deleted,
        min(occurred_at) FILTER (WHERE kind IN ('cleanup.deleted', 'cleanup.already_deleted'))
            AS array_account_deleted_at
    FROM outcomes
    WHERE array_account_id IS NOT NULL
    GROUP BY array_account_id
),
accounts AS (
    SELECT array_account_id FROM linked
    UNION
    SELECT array_account_id FROM scheduled
)
SELECT
    accounts.array_account_id,
    coalesce(linked.user_id, scheduled.user_id) AS user_id,
    coalesce(linked.user_count, 0) AS user_count,
    linked.first_linked_at,
    rows_now.entitlement_status,
    coalesce(rows_now.entitlement_rows, 0) AS entitlement_rows,
    pending.pending_cleanup_kind,
    pending.pending_cleanup_expires_at,
    scheduled.cleanup_first_scheduled_at,
    scheduled.cleanup_expired_at,
    scheduled.cleanup_cancelled_at,
    results.last_outcome,
    results.last_outcome_at,
    coalesce(results.array_account_deleted, false) AS array_account_deleted,
    results.array_account_deleted_at
FROM accounts
LEFT JOIN linked USING (array_account_id)
LEFT JOIN rows_now USING (array_account_id)
LEFT JOIN scheduled USING (array_account_id)
LEFT JOIN pending USING (array_account_id)
LEFT JOIN results USING (array_account_id);
