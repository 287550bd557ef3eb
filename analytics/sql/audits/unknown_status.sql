-- audit: unknown_status
-- scope: now
-- title: Entitlement rows with an unknown status
-- invariant: an entitlement row is Active, Superseded, Cancelled or Removed.
-- remediation: Find the writer (event_id) and set the status the row's history implies (`entitlement_history` in the lake). Readers carry an unknown status as text; cleanup and the service treat the row as not Active.
-- docs: docs/table.md#statuses
-- time: changed_at
-- clock: stream
-- Every entitlement row whose status now is missing or not one of audit_known_statuses.
SELECT user_id, array_account_id, status, pk, sk, changed_at, event_id
FROM entitlements
WHERE status IS NULL OR NOT list_contains(getvariable('audit_known_statuses'), status)
ORDER BY user_id, sk
