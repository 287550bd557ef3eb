-- report: accounts_per_user
-- title: Array accounts per user
-- chart: bar accounts -> users
-- clock: none
-- How many distinct Array accounts each user's entitlement rows ever named, and how many users have
-- that many (`active_now`: of those users, how many hold an Active row now).
WITH per_user AS (
    SELECT user_id, count(DISTINCT array_account_id) AS accounts
    FROM entitlement_history
    WHERE array_account_id IS NOT NULL
    GROUP BY user_id
),
active_now AS (
    SELECT DISTINCT user_id FROM entitlements WHERE status = 'Active'
)
SELECT
    CAST(accounts AS VARCHAR) AS accounts,
    count(*) AS users,
    round(100.0 * count(*) / sum(count(*)) OVER (), 1) AS share_pct,
    count(active_now.user_id) AS active_now
FROM per_user
LEFT JOIN active_now USING (user_id)
GROUP BY per_user.accounts
ORDER BY per_user.accounts
