-- audit: unknown_status_ever
-- scope: ever
-- title: Entitlement rows that ever held an unknown status
-- invariant: an entitlement row is Active, Superseded, Cancelled or Removed.
-- remediation: Check `unknown_status` for rows still holding it, and fix the writer (event_id).
-- docs: docs/table.md#statuses
-- time: first_seen_at
-- clock: stream
-- One row per entitlement row and unknown status (missing, or not one of audit_known_statuses) any of
-- its versions held.
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
