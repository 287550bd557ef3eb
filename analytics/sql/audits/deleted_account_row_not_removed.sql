-- audit: deleted_account_row_not_removed
-- scope: now, ever
-- invariant: after cleanup deletes an account it "marks the entitlement row that named it Removed"; that last step is best effort, and `entitlements cleanup repair` closes the gap.
-- docs: docs/operations/cleanup.md#repair, docs/operations/cleanup.md#marking-the-row-removed
-- clock: processor
-- now.title: Accounts deleted by cleanup whose row is not Removed
-- now.remediation: Run `entitlements cleanup repair --dry-run` to list the rows, then `entitlements cleanup repair` to mark them Removed (each on the same condition as cleanup's own mark).
-- now.time: deleted_at
-- now: Every entitlement row, now, naming an Array account that cleanup deleted (audit_deleted_outcomes:
-- now: deleted, or already gone at Array) whose status is not Removed.
-- ever.title: Cleanups that deleted an account but could not mark its row Removed
-- ever.remediation: Each is a mark that failed after a delete (detail: the error code). `deleted_account_row_not_removed` lists those still open: `entitlements cleanup repair` closes them. Many at once point at DynamoDB throttling or GSI1 lag.
-- ever.time: occurred_at
-- ever: Every cleanup.mark_failed outcome: the account was deleted at Array and its row was left as it was
-- ever: (counted even when a repair marked it later).
WITH now_findings AS (
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
),
ever_findings AS (
    SELECT user_id, array_account_id, kind, detail, occurred_at, attempt, source_event_id
    FROM outcomes
    WHERE kind = 'cleanup.mark_failed'
    ORDER BY occurred_at, user_id
)
SELECT *
FROM query_table(
    CASE coalesce(getvariable('audit_scope'), 'now')
        WHEN 'now' THEN 'now_findings'
        WHEN 'ever' THEN 'ever_findings'
        ELSE error('audit_scope is now or ever')
    END
)
