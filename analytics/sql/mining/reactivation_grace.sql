-- report: reactivation_grace
-- title: Reactivation within the grace period
-- chart: bar bucket -> cancellations
-- clock: business
-- Every cancellation (a row going Active -> Cancelled), by what followed it: reactivated (by weeks of the
-- CLEANUP_TTL_DAYS grace period, business time), cleaned up (the row Removed, its account deleted), or
-- still pending (neither yet). `share_pct` is of all cancellations; `cumulative_pct` adds up the
-- reactivations week by week.
WITH cancellations AS (
    SELECT pk, sk, business_at AS cancelled_at, sequence_key
    FROM mining_entitlement_transitions
    WHERE transition = 'cancellation'
),
followed AS (
    SELECT
        c.pk,
        c.sk,
        c.cancelled_at,
        (
            SELECT min(t.business_at)
            FROM mining_entitlement_transitions AS t
            WHERE t.pk = c.pk AND t.sk = c.sk AND t.sequence_key > c.sequence_key AND t.transition = 'reactivation'
        ) AS reactivated_at,
        (
            SELECT min(t.business_at)
            FROM mining_entitlement_transitions AS t
            WHERE t.pk = c.pk AND t.sk = c.sk AND t.sequence_key > c.sequence_key AND t.transition = 'removed'
        ) AS removed_at
    FROM cancellations AS c
),
outcomes AS (
    SELECT
        CASE
            WHEN reactivated_at IS NOT NULL AND (removed_at IS NULL OR reactivated_at < removed_at) THEN
                CASE
                    WHEN epoch(reactivated_at) - epoch(cancelled_at) > 86400 * getvariable('mine_cleanup_ttl_days')
                        THEN 99
                    ELSE CAST(floor((epoch(reactivated_at) - epoch(cancelled_at)) / (7 * 86400)) AS INTEGER)
                END
            WHEN removed_at IS NOT NULL THEN 100
            ELSE 101
        END AS bucket_order
    FROM followed
),
labelled AS (
    SELECT
        bucket_order,
        CASE
            WHEN bucket_order < 99 THEN
                'reactivated in days ' || (7 * bucket_order) || '-' || (7 * bucket_order + 6)
            WHEN bucket_order = 99 THEN 'reactivated after the grace period'
            WHEN bucket_order = 100 THEN 'not reactivated: cleaned up'
            ELSE 'not reactivated: pending'
        END AS bucket,
        count(*) AS cancellations
    FROM outcomes
    GROUP BY bucket_order
)
SELECT
    bucket,
    cancellations,
    round(100.0 * cancellations / sum(cancellations) OVER (), 1) AS share_pct,
    CASE
        WHEN bucket_order < 99 THEN
            round(100.0 * sum(cancellations) OVER (ORDER BY bucket_order) / sum(cancellations) OVER (), 1)
    END AS cumulative_pct
FROM labelled
ORDER BY bucket_order
