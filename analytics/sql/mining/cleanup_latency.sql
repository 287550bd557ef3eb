-- report: cleanup_latency
-- title: Cleanup latency: scheduled, expired, account deleted, row Removed
-- chart: logbar stage -> p50_hours, p90_hours
-- clock: business
-- For every cleanup record DynamoDB's TTL removed, how long each step took, per cleanup kind, all on one
-- clock (business time: the processor's clock is the service's, simulated in demos): scheduled (the
-- record's createdAt) -> due (its ttl: the policy's 63 or 1 days) -> handled (the processor's first
-- outcome for the TTL removal) -> account deleted (its deleted outcome) -> row Removed (the row's
-- updatedAt). The TTL removal's stream time is another clock and is not used (schema/lake.md, "Time axes").
-- Under a simulated clock (the demo's runs 63 days in 15 s, 362,880 times real time) every real second
-- the TTL sweep and the consumer take reads as that many seconds here: a "due -> handled" of weeks in a
-- demo is seconds of real lag. On the real clock the figures are what they say.
WITH expiries AS (
    SELECT
        h.cleanup_kind,
        h.array_account_id,
        h.event_id,
        try_cast(h.item_created_at AS TIMESTAMPTZ) AS scheduled_at,
        CASE WHEN h.ttl_type = 'N' AND h.ttl BETWEEN 0 AND 99999999999 THEN to_timestamp(h.ttl) END AS due_at
    FROM cleanup_record_history AS h
    WHERE h.deleted AND h.ttl_deletion
),
timed AS (
    SELECT
        e.*,
        (SELECT min(o.occurred_at) FROM outcomes AS o WHERE o.source_event_id = e.event_id) AS handled_at,
        (
            SELECT min(o.occurred_at) FROM outcomes AS o
            WHERE o.source_event_id = e.event_id AND o.kind IN ('cleanup.deleted', 'cleanup.already_deleted')
        ) AS deleted_at,
        (
            SELECT min(t.business_at) FROM mining_entitlement_transitions AS t
            WHERE t.array_account_id = e.array_account_id AND t.transition = 'removed'
        ) AS removed_at
    FROM expiries AS e
),
stages AS (
    SELECT cleanup_kind, 1 AS stage_order, 'scheduled -> due' AS stage, epoch(due_at) - epoch(scheduled_at) AS seconds
    FROM timed
    UNION ALL
    SELECT cleanup_kind, 2, 'due -> handled', epoch(handled_at) - epoch(due_at) FROM timed
    UNION ALL
    SELECT cleanup_kind, 3, 'handled -> account deleted', epoch(deleted_at) - epoch(handled_at) FROM timed
    UNION ALL
    SELECT cleanup_kind, 4, 'account deleted -> row Removed', epoch(removed_at) - epoch(deleted_at) FROM timed
    UNION ALL
    SELECT cleanup_kind, 5, 'scheduled -> row Removed', epoch(removed_at) - epoch(scheduled_at) FROM timed
)
SELECT
    cleanup_kind || ': ' || stage AS stage,
    count(*) AS cleanups,
    count(seconds) AS measured,
    round(quantile_cont(seconds, 0.5) / 3600, 2) AS p50_hours,
    round(quantile_cont(seconds, 0.9) / 3600, 2) AS p90_hours,
    round(max(seconds) / 3600, 2) AS max_hours
FROM stages
GROUP BY cleanup_kind, stage_order, stage
ORDER BY cleanup_kind, stage_order
