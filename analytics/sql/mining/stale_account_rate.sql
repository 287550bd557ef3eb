-- report: stale_account_rate
-- title: Stale-account rate
-- chart: line day -> stale_rate_pct
-- clock: business
-- Per day (business time): Array accounts linked (new entitlement rows), accounts made stale (a stale
-- cleanup record scheduled on a second signup, STALE_ENTITLEMENT_TTL_DAYS) and the rate between them;
-- `cumulative_rate_pct` is the rate over every day so far. A stale record's day is its createdAt (one
-- without a readable one is not counted: the stream's clock is never mixed in).
WITH linked AS (
    SELECT day, count(*) AS accounts_linked
    FROM mining_entitlement_transitions
    WHERE first_version
    GROUP BY day
),
stale AS (
    SELECT
        CAST(try_cast(item_created_at AS TIMESTAMPTZ) AS DATE) AS day,
        count(DISTINCT array_account_id) AS accounts_made_stale
    FROM cleanup_record_history
    WHERE cleanup_kind = 'stale' AND NOT deleted AND change_kind = 'INSERT'
        AND try_cast(item_created_at AS TIMESTAMPTZ) IS NOT NULL
    GROUP BY 1
),
joined AS (
    SELECT
        day,
        coalesce(accounts_linked, 0) AS accounts_linked,
        coalesce(accounts_made_stale, 0) AS accounts_made_stale
    FROM linked
    FULL OUTER JOIN stale USING (day)
)
SELECT
    day,
    accounts_linked,
    accounts_made_stale,
    round(100.0 * accounts_made_stale / nullif(accounts_linked, 0), 1) AS stale_rate_pct,
    round(
        100.0 * sum(accounts_made_stale) OVER (ORDER BY day) / nullif(sum(accounts_linked) OVER (ORDER BY day), 0), 1
    ) AS cumulative_rate_pct
FROM joined
ORDER BY day
