-- audit: unknown_status
-- scope: now, ever
-- invariant: an entitlement row is Active, Superseded, Cancelled or Removed.
-- docs: docs/table.md#statuses
-- clock: stream
-- now.title: Entitlement rows with an unknown status
-- now.remediation: Find the writer (event_id) and set the status the row's history implies (`entitlement_history` in the lake). Readers carry an unknown status as text; cleanup and the service treat the row as not Active.
-- now.time: changed_at
-- now: Every entitlement row whose status now is missing or not one of audit_known_statuses.
-- ever.title: Entitlement rows that ever held an unknown status
-- ever.remediation: Check `unknown_status` for rows still holding it, and fix the writer (event_id).
-- ever.time: first_seen_at
-- ever: One row per entitlement row and unknown status (missing, or not one of audit_known_statuses) any of
-- ever: its versions held.
WITH now_findings AS (
    SELECT user_id, array_account_id, status, pk, sk, changed_at, event_id
    FROM entitlements
    WHERE status IS NULL OR NOT list_contains(getvariable('audit_known_statuses'), status)
    ORDER BY user_id, sk
),
ever_findings AS (
    SELECT
        user_id,
        array_account_id,
        status,
        pk,
        sk,
        min(valid_from) AS first_seen_at,
        count(*) AS versions,
        arg_min(event_id, valid_from) AS event_id
    FROM entitlement_history
    WHERE NOT deleted AND (status IS NULL OR NOT list_contains(getvariable('audit_known_statuses'), status))
    GROUP BY user_id, array_account_id, status, pk, sk
    ORDER BY user_id, sk, first_seen_at
)
SELECT *
FROM query_table(
    CASE coalesce(getvariable('audit_scope'), 'now')
        WHEN 'now' THEN 'now_findings'
        WHEN 'ever' THEN 'ever_findings'
        ELSE error('audit_scope is now or ever')
    END
)
