-- Helper views the mining reports share (run after the lake's views and before any report; the
-- Python runner does it). From the DuckDB CLI, in any folder (the report's file by its path):
--   duckdb -c "$(entitlements lake views --include mining)" -c ".read <path>/analytics/sql/mining/daily_activity.sql"
-- Time axis: `business_at` is business time only (the row's updatedAt as the service wrote it); a version
-- without a readable one (a removal's image, an unparseable value) takes the row's latest business time
-- before it, else its createdAt, else NULL: never the stream's clock, so a chart keeps one clock.
SET VARIABLE mine_cleanup_ttl_days = coalesce(getvariable('mine_cleanup_ttl_days'), 63);
SET VARIABLE mine_stale_ttl_days = coalesce(getvariable('mine_stale_ttl_days'), 1);

-- Every version of every entitlement row with the one before it, in the row's stream order.
CREATE OR REPLACE VIEW mining_entitlement_versions AS
SELECT
    user_id,
    array_account_id,
    pk,
    sk,
    status,
    deleted,
    change_kind,
    lag(status) OVER w AS previous_status,
    coalesce(lag(deleted) OVER w, false) AS previous_deleted,
    row_number() OVER w = 1 AS first_version,
    coalesce(
        last_value(CASE WHEN NOT deleted THEN try_cast(item_updated_at AS TIMESTAMPTZ) END IGNORE NULLS) OVER w,
        try_cast(item_created_at AS TIMESTAMPTZ)
    ) AS business_at,
    valid_from,
    sequence_key
FROM entitlement_history
WINDOW w AS (PARTITION BY pk, sk ORDER BY sequence_key, stream_arn, shard_id);

-- What each version did: a row created (the user's first, or a second signup), cancelled, reactivated,
-- retired, removed; `active_delta` is +1 when the row became Active, -1 when it stopped being Active.
CREATE OR REPLACE VIEW mining_entitlement_transitions AS
WITH firsts AS (
    SELECT
        *,
        first_version AND sequence_key = min(sequence_key) FILTER (WHERE first_version)
            OVER (PARTITION BY user_id) AS users_first_row
    FROM mining_entitlement_versions
)
SELECT
    *,
    CAST(business_at AS DATE) AS day,
    CASE
        WHEN first_version AND users_first_row THEN 'signup'
        WHEN first_version THEN 'second_signup'
        WHEN deleted THEN 'deleted'
        WHEN previous_status = 'Active' AND status = 'Cancelled' THEN 'cancellation'
        WHEN previous_status = 'Cancelled' AND status = 'Active' THEN 'reactivation'
        WHEN previous_status = 'Active' AND status = 'Superseded' THEN 'superseded'
        WHEN previous_status IS DISTINCT FROM 'Removed' AND status = 'Removed' THEN 'removed'
        WHEN previous_status = status THEN 'update'
        ELSE 'other'
    END AS transition,
    CAST(status = 'Active' AND NOT deleted AS INTEGER)
        - CAST(coalesce(previous_status = 'Active' AND NOT previous_deleted, false) AS INTEGER) AS active_delta
FROM firsts;
