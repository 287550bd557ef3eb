-- users: one row per user id the log has seen, with what the table holds for them now. Column meanings
-- (and the views' COMMENTs): schema/lake.md, "Column meanings".
CREATE OR REPLACE VIEW users AS
WITH seen AS (
    SELECT user_id, min(created_at) AS first_seen_at, max(created_at) AS last_changed_at, count(*) AS change_count
    FROM changes
    WHERE user_id IS NOT NULL
    GROUP BY user_id
),
rows_now AS (
    SELECT
        user_id,
        count(*) AS entitlement_rows,
        count(*) FILTER (WHERE status = 'Active') AS active_rows,
        min(array_account_id) FILTER (WHERE status = 'Active') AS active_array_account_id,
        count(DISTINCT array_account_id) AS array_account_count
    FROM entitlements
    GROUP BY user_id
),
cleanups_now AS (
    SELECT
        user_id,
        count(*) AS pending_cleanups,
        bool_or(cleanup_kind = 'cancellation') AS cancellation_pending
    FROM cleanup_records
    GROUP BY user_id
)
SELECT
    seen.user_id,
    coalesce(rows_now.entitlement_rows, 0) AS entitlement_rows,
    coalesce(rows_now.active_rows, 0) AS active_rows,
    rows_now.active_array_account_id,
    coalesce(rows_now.array_account_count, 0) AS array_account_count,
    coalesce(cleanups_now.pending_cleanups, 0) AS pending_cleanups,
    coalesce(cleanups_now.cancellation_pending, false) AS cancellation_pending,
    seen.first_seen_at,
    seen.last_changed_at,
    seen.change_count
FROM seen
LEFT JOIN rows_now USING (user_id)
LEFT JOIN cleanups_now USING (user_id);
