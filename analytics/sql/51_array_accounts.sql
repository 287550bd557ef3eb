-- array_accounts: one row per Array account id named by an entitlement row or a cleanup record, ever:
-- who it belongs to, its row's status now, its cleanup now and in the past, and the latest outcome.
CREATE OR REPLACE VIEW array_accounts AS
WITH linked AS (
    SELECT
        array_account_id,
        min(user_id) AS user_id,
        count(DISTINCT user_id) AS users,
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
        min(valid_from) FILTER (WHERE NOT deleted) AS first_scheduled_at,
        min(valid_from) FILTER (WHERE deleted AND ttl_deletion) AS expired_at,
        min(valid_from) FILTER (WHERE deleted AND NOT ttl_deletion) AS cancelled_at
    FROM cleanup_record_history
    WHERE array_account_id IS NOT NULL
    GROUP BY array_account_id
),
pending AS (
    SELECT array_account_id, min(cleanup_kind) AS pending_cleanup_kind, min(expires_at) AS expires_at
    FROM cleanup_records
    WHERE array_account_id IS NOT NULL
    GROUP BY array_account_id
),
results AS (
    SELECT
        array_account_id,
        arg_max(kind, occurred_at) AS last_outcome,
        max(occurred_at) AS last_outcome_at,
        bool_or(kind IN ('cleanup.deleted', 'cleanup.already_deleted')) AS deleted_at_array
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
    coalesce(linked.users, 0) AS users,
    linked.first_linked_at,
    rows_now.entitlement_status,
    coalesce(rows_now.entitlement_rows, 0) AS entitlement_rows,
    pending.pending_cleanup_kind,
    pending.expires_at,
    scheduled.first_scheduled_at,
    scheduled.expired_at,
    scheduled.cancelled_at,
    results.last_outcome,
    results.last_outcome_at,
    coalesce(results.deleted_at_array, false) AS deleted_at_array
FROM accounts
LEFT JOIN linked USING (array_account_id)
LEFT JOIN rows_now USING (array_account_id)
LEFT JOIN scheduled USING (array_account_id)
LEFT JOIN pending USING (array_account_id)
LEFT JOIN results USING (array_account_id);
