-- audit: duplicate_active_rows
-- scope: now, ever
-- invariant: no write leaves "the user with two active rows": a link writes only while the row is Active (SaveIfActive), a second signup retires the old row in the same transaction that writes the new one.
-- group_by: user_id
-- clock: stream
-- now.title: Users with more than one Active row
-- now.remediation: Keep Active the row naming the account the user uses now (the newest link) and retire the other as a second signup does: set it Superseded and write a stale-account record naming its account, so cleanup deletes that account. Then find the write that made the second row Active (its event_id; `stale_write` often names it).
-- now.docs: docs/table.md#the-services-write-paths, docs/table.md#statuses
-- now.time: changed_at
-- now: Every Active entitlement row of a user who has more than one now. Groups are users, surplus rows are
-- now: the Active rows beyond one per user, rows involved are all of them. (The Active rows are read once and
-- now: kept, then grouped and joined with the users found: a second scan of the state would cost more than
-- now: keeping them, and a window over them sorts every row.)
-- ever.title: Users who ever had two Active rows at the same instant
-- ever.remediation: If `duplicate_active_rows` finds nothing now, the state was put right since; find the writes at first_overlap_from (event ids in the change log) and fix the writer, which wrote without the Active condition.
-- ever.docs: docs/table.md#the-services-write-paths
-- ever.time: first_overlap_from
-- ever: Every entitlement row that was Active while another row of the same user was Active too (stream time,
-- ever: [valid_from, valid_to) of each version), even if it was fixed later. Overlaps no longer than
-- ever: audit_overlap_tolerance_seconds are the records of one transaction and are not counted. One row per
-- ever: row involved; last_overlap_to is NULL while the overlap lasts.
WITH now_findings AS (
    WITH active AS MATERIALIZED (
        SELECT
            user_id,
            array_account_id,
            status,
            pk,
            sk,
            item_created_at,
            item_updated_at,
            changed_at,
            event_id
        FROM entitlements
        WHERE status = 'Active'
    )
    SELECT *
    FROM active
    WHERE user_id IN (SELECT user_id FROM active GROUP BY user_id HAVING count(*) > 1)
    ORDER BY user_id, sk
),
ever_findings AS (
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
)
SELECT *
FROM query_table(
    CASE coalesce(getvariable('audit_scope'), 'now')
        WHEN 'now' THEN 'now_findings'
        WHEN 'ever' THEN 'ever_findings'
        ELSE error('audit_scope is now or ever')
    END
)
