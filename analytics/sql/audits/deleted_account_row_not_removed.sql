-- audit: deleted_account_row_not_removed
-- scope: now
-- title: Accounts deleted by cleanup whose row is not Removed
-- invariant: after cleanup deletes an account it "marks the entitlement row that named it Removed"; that last step is best effort, and `entitlements cleanup repair` closes the gap.
-- remediation: Run `entitlements cleanup repair --dry-run` to list the rows, then `entitlements cleanup repair` to mark them Removed (each on the same condition as cleanup's own mark).
-- docs: docs/operations/cleanup.md#repair, docs/operations/cleanup.md#marking-the-row-removed
-- time: deleted_at
-- clock: processor
-- Every entitlement row, now, naming an Array account that cleanup deleted (audit_deleted_outcomes:
-- deleted, or already gone at Array) whose status is not Removed.
WITH deleted AS (
    SELECT array_account_id, min(occurred_at) AS deleted_at, arg_min(kind, occurred_at) AS deleted_by
    FROM outcomes
    WHERE list_contains(getvariable('audit_deleted_outcomes'), kind) AND array_account_id IS NOT NULL
    GROUP BY array_account_id
)
SELECT
    e.user_id,
    e.array_account_id,
    e.status,
    d.deleted_by,
    d.deleted_at,
    e.pk,
    e.sk,
    e.changed_at,
    e.event_id
FROM entitlements AS e
JOIN deleted AS d ON d.array_account_id = e.array_account_id
WHERE e.status IS DISTINCT FROM 'Removed'
ORDER BY e.user_id, e.sk
