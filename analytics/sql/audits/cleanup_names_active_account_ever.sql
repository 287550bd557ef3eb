-- audit: cleanup_names_active_account_ever
-- scope: ever
-- title: Cleanup records that ever named an Array account in use
-- invariant: "a record can never name the account in use": a cleanup record schedules the delete of an account no Active row uses.
-- remediation: If `cleanup_names_active_account` finds nothing now, the overlap ended; check `guard_refusals` and `removed_without_cleanup` for what cleanup did while it lasted.
-- docs: docs/operations/cleanup.md#the-in-use-guard-the-designs-order-and-ours
-- time: first_overlap_from
-- clock: stream
-- Every cleanup record that existed while an entitlement row naming the same Array account was Active
-- (stream time), even if fixed later. Overlaps no longer than audit_overlap_tolerance_seconds are the
-- records of one transaction (a cancellation, a reactivation) and are not counted.
WITH records AS (
    SELECT user_id, cleanup_kind, array_account_id, pk, sk, valid_from, valid_to
    FROM cleanup_record_history
    WHERE NOT deleted AND array_account_id IS NOT NULL
),
active AS (
    SELECT user_id, array_account_id, sk, valid_from, valid_to
    FROM entitlement_history
    WHERE status = 'Active' AND NOT deleted
),
overlapping AS (
    SELECT
        r.user_id,
        r.cleanup_kind,
        r.array_account_id,
        r.pk,
        r.sk,
        a.user_id AS row_user_id,
        a.sk AS row_sk,
        greatest(r.valid_from, a.valid_from) AS overlap_from,
        CASE
            WHEN r.valid_to IS NULL THEN a.valid_to
            WHEN a.valid_to IS NULL THEN r.valid_to
            ELSE least(r.valid_to, a.valid_to)
        END AS overlap_to
    FROM records AS r
    JOIN active AS a
        ON a.array_account_id = r.array_account_id
        AND (a.valid_to IS NULL OR r.valid_from < a.valid_to)
        AND (r.valid_to IS NULL OR a.valid_from < r.valid_to)
)
SELECT
    user_id,
    cleanup_kind,
    array_account_id,
    pk,
    sk,
    row_user_id,
    row_sk,
    min(overlap_from) AS first_overlap_from,
    CASE WHEN bool_or(overlap_to IS NULL) THEN NULL ELSE max(overlap_to) END AS last_overlap_to
FROM overlapping
WHERE overlap_to IS NULL
    OR epoch(overlap_to) - epoch(overlap_from) > getvariable('audit_overlap_tolerance_seconds')
GROUP BY user_id, cleanup_kind, array_account_id, pk, sk, row_user_id, row_sk
ORDER BY user_id, sk, row_sk
