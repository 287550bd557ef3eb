-- audit: cleanup_names_active_account
-- scope: now, ever
-- invariant: "a record can never name the account in use": a cleanup record schedules the delete of an account no Active row uses.
-- clock: stream
-- now.title: Cleanup records naming an Array account an Active row uses
-- now.remediation: At expiry cleanup would delete an account in use; its in-use guard refuses and records `cleanup.refused_by_guard`. Decide which is right: if the user uses the account, delete the cleanup record (pk, sk); if the row should not be Active (a `stale_write`), set it back to its earlier status and let the record expire.
-- now.docs: docs/operations/cleanup.md#the-in-use-guard-the-designs-order-and-ours, docs/table.md#the-services-write-paths
-- now.time: changed_at
-- now: Every pending cleanup record whose Array account is the account of an Active entitlement row now.
-- ever.title: Cleanup records that ever named an Array account in use
-- ever.remediation: If `cleanup_names_active_account` finds nothing now, the overlap ended; check `guard_refusals` and `removed_without_cleanup` for what cleanup did while it lasted.
-- ever.docs: docs/operations/cleanup.md#the-in-use-guard-the-designs-order-and-ours
-- ever.time: first_overlap_from
-- ever: Every cleanup record that existed while an entitlement row naming the same Array account was Active
-- ever: (stream time), even if fixed later. Overlaps no longer than audit_overlap_tolerance_seconds are the
-- ever: records of one transaction (a cancellation, a reactivation) and are not counted.
WITH now_findings AS (
    SELECT
        c.user_id,
        c.cleanup_kind,
        c.array_account_id,
        c.ttl_raw,
        c.pk,
        c.sk,
        e.user_id AS row_user_id,
        e.sk AS row_sk,
        c.changed_at,
        c.event_id
    FROM cleanup_records AS c
    JOIN entitlements AS e ON e.array_account_id = c.array_account_id AND e.status = 'Active'
    ORDER BY c.user_id, c.sk, e.sk
),
ever_findings AS (
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
)
SELECT *
FROM query_table(
    CASE coalesce(getvariable('audit_scope'), 'now')
        WHEN 'now' THEN 'now_findings'
        WHEN 'ever' THEN 'ever_findings'
        ELSE error('audit_scope is now or ever')
    END
)
