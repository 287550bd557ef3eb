-- audit: array_account_without_row
-- scope: ever
-- title: Array accounts the service created that no entitlement row names
-- invariant: a signup creates the user at Array, then writes one fresh Active row; an Array account the service created and no row ever named (a signup or second signup whose write never landed) is left behind.
-- remediation: Look up each user's signup or second signup at created_at: the service answered 503 when its write kept failing. If the user should hold the account, repeat the request (the service then writes the row); if not, delete the account at Array.
-- docs: docs/table.md#the-services-write-paths
-- time: created_at
-- clock: processor
-- Every account the service recorded as created at Array (outcome array.account_created, recorded just
-- before the write naming it), recorded audit_outcome_grace_seconds or more before the audit's instant
-- (audit_as_of, else the latest stream time in the log), that no version of any entitlement row has
-- ever named (entitlement_history). The grace is the time the row's stream record has to reach the lake
-- after the outcome was recorded. created_by says which request created it (signup, second_signup).
-- An account scheduled on its stale key (a request that lost the user's guard to a concurrent one:
-- outcome signup.race_lost) has its cleanup path and is not reported.
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
    AND NOT EXISTS (
        SELECT 1
        FROM changes AS c
        WHERE c.item_kind = 'stale'
            AND c.change_kind = 'INSERT'
            AND c.new_array_account_id = o.array_account_id
    )
    AND NOT EXISTS (SELECT 1 FROM audit_erasure_exceptions AS x WHERE x.user_id = o.user_id)
ORDER BY created_at, o.user_id
