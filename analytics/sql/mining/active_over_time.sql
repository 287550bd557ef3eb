-- report: active_over_time
-- title: Active entitlements over time
-- chart: line day -> active, cancelled, superseded, removed
-- clock: business
-- The entitlement rows in each status at the end of each day (business time), from every row's history:
-- what the table held, day by day. `active_users` counts users with at least one Active row.
WITH deltas AS (
    SELECT
        day,
        user_id,
        CAST(status = 'Active' AND NOT deleted AS INTEGER)
            - CAST(coalesce(previous_status = 'Active' AND NOT previous_deleted, false) AS INTEGER) AS active,
        CAST(status = 'Cancelled' AND NOT deleted AS INTEGER)
            - CAST(coalesce(previous_status = 'Cancelled' AND NOT previous_deleted, false) AS INTEGER) AS cancelled,
        CAST(status = 'Superseded' AND NOT deleted AS INTEGER)
            - CAST(coalesce(previous_status = 'Superseded' AND NOT previous_deleted, false) AS INTEGER) AS superseded,
        CAST(status = 'Removed' AND NOT deleted AS INTEGER)
            - CAST(coalesce(previous_status = 'Removed' AND NOT previous_deleted, false) AS INTEGER) AS removed
    FROM mining_entitlement_transitions
),
user_days AS (
    -- each user's Active rows at the end of each day they changed, to count users with any
    SELECT
        day,
        user_id,
        sum(sum(active)) OVER (PARTITION BY user_id ORDER BY day) AS active_rows
    FROM deltas
    GROUP BY day, user_id
),
user_flips AS (
    SELECT
        day,
        CAST(active_rows > 0 AS INTEGER)
            - CAST(coalesce(lag(active_rows) OVER (PARTITION BY user_id ORDER BY day), 0) > 0 AS INTEGER) AS delta
    FROM user_days
),
days AS (
    SELECT CAST(unnest(range(CAST(min(day) AS TIMESTAMP), CAST(max(day) AS TIMESTAMP) + INTERVAL 1 DAY, INTERVAL 1 DAY)) AS DATE) AS day
    FROM deltas
),
per_day AS (
    SELECT day, sum(active) AS active, sum(cancelled) AS cancelled, sum(superseded) AS superseded,
        sum(removed) AS removed
    FROM deltas
    GROUP BY day
),
users_per_day AS (
    SELECT day, sum(delta) AS active_users FROM user_flips GROUP BY day
)
SELECT
    days.day,
    CAST(sum(coalesce(per_day.active, 0)) OVER w AS BIGINT) AS active,
    CAST(sum(coalesce(per_day.cancelled, 0)) OVER w AS BIGINT) AS cancelled,
    CAST(sum(coalesce(per_day.superseded, 0)) OVER w AS BIGINT) AS superseded,
    CAST(sum(coalesce(per_day.removed, 0)) OVER w AS BIGINT) AS removed,
    CAST(sum(coalesce(users_per_day.active_users, 0)) OVER w AS BIGINT) AS active_users
FROM days
LEFT JOIN per_day USING (day)
LEFT JOIN users_per_day USING (day)
WINDOW w AS (ORDER BY days.day)
ORDER BY days.day
