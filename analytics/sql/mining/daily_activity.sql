-- report: daily_activity
-- title: Signups, cancellations, reactivations and second signups per day
-- chart: stacked day -> signups, second_signups, cancellations, reactivations
-- clock: business
-- What users did each day (business time): a signup is the first entitlement row a user ever has; a
-- second signup is a new row for a user who already had one (a new Array account); a cancellation turns
-- a row from Active to Cancelled; a reactivation from Cancelled back to Active (within the grace period).
SELECT
    day,
    count(*) FILTER (WHERE transition = 'signup') AS signups,
    count(*) FILTER (WHERE transition = 'second_signup') AS second_signups,
    count(*) FILTER (WHERE transition = 'cancellation') AS cancellations,
    count(*) FILTER (WHERE transition = 'reactivation') AS reactivations,
    count(*) FILTER (WHERE transition = 'removed') AS rows_removed
FROM mining_entitlement_transitions
GROUP BY day
ORDER BY day
