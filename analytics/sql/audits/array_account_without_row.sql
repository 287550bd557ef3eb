-- audit: array_account_without_row
-- scope: ever
-- title: Array accounts the service created that no entitlement row names
-- invariant: signup "creates the user at Array, then one unconditional put of a fresh Active row"; "an Array account with no row is an audit finding" (issue 14), as is an account a second signup created and never wrote.
-- time: created_at
-- Every account the service recorded as created at Array (outcome array.account_created, recorded just
-- before the write naming it), recorded audit_outcome_grace_seconds or more before the audit's instant
-- (audit_as_of, else the latest stream time in the log), that no version of any entitlement row has
-- ever named (entitlement_history). The grace is the time the row's stream record has to reach the lake
-- after the outcome was recorded. created_by says which request created it (signup, second_signup).
-- Erased users are excepted (audit_erasure_exceptions).
SELECT
    o.user_id,
    o.array_account_id,
    o.detail AS created_by,
    o.occurred_at AS created_at,
    o.outcome_id
FROM outcomes AS o
WHERE o.kind = 'array.account_created'
    AND epoch(o.occurred_at) + getvariable('audit_outcome_grace_seconds') <= epoch(
        coalesce(getvariable('audit_as_of'), (SELECT max(created_at) FROM raw_changes))
    )
    AND NOT EXISTS (
        SELECT 1
        FROM entitlement_history AS h
        WHERE h.array_account_id = o.array_account_id
    )
    AND NOT EXISTS (SELECT 1 FROM audit_erasure_exceptions AS x WHERE x.user_id = o.user_id)
ORDER BY created_at, o.user_id
