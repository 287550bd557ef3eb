-- audit: duplicate_active_rows_ever
-- scope: ever
-- title: Users who ever had two Active rows at the same instant
-- invariant: no write leaves "the user with two active rows": a link writes only while the row is Active (SaveIfActive), a second signup retires the old row in the same transaction that writes the new one.
-- remediation: If `duplicate_active_rows` finds nothing now, the state was put right since; find the writes at first_overlap_from (event ids in the change log) and fix the writer, which wrote without the Active condition.
-- docs: docs/table.md#the-services-write-paths
-- group_by: user_id
-- time: first_overlap_from
-- clock: stream
-- Every entitlement row that was Active while another row of the same user was Active too (stream time,
-- [valid_from, valid_to) of each version), even if it was fixed later. Overlaps no longer than
-- audit_overlap_tolerance_seconds are the records of one transaction and are not counted. One row per
-- row involved; last_overlap_to is NULL while the overlap lasts.
WITH active AS (
    SELECT user_id, array_account_id, pk, sk, valid_from, valid_to
    FROM entitlement_history
    WHERE status = 'Active' AND NOT deleted
),
overlapping AS (
    SELECT
        a.user_id,
        a.array_account_id,
        a.pk,
        a.sk,
        greatest(a.valid_from, b.valid_from) AS overlap_from,
        CASE
            WHEN a.valid_to IS NULL THEN b.valid_to
            WHEN b.valid_to IS NULL THEN a.valid_to
            ELSE least(a.valid_to, b.valid_to)
        END AS overlap_to
    FROM active AS a
    JOIN active AS b
        ON a.user_id = b.user_id
        AND a.sk <> b.sk
        AND (b.valid_to IS NULL OR a.valid_from < b.valid_to)
        AND (a.valid_to IS NULL OR b.valid_from < a.valid_to)
)
SELECT
    user_id,
    array_account_id,
    pk,
    sk,
    min(overlap_from) AS first_overlap_from,
    CASE WHEN bool_or(overlap_to IS NULL) THEN NULL ELSE max(overlap_to) END AS last_overlap_to
FROM overlapping
WHERE overlap_to IS NULL
    OR epoch(overlap_to) - epoch(overlap_from) > getvariable('audit_overlap_tolerance_seconds')
GROUP BY user_id, array_account_id, pk, sk
ORDER BY user_id, sk
