-- audit: unknown_item_kind_ever
-- scope: ever
-- title: Items of an unknown kind ever written
-- invariant: the table holds entitlement rows (ENTITLEMENT#<account>), the cancellation record (CLEANUP#CANCELLATION) and stale-account records (CLEANUP#STALE#<account>), the service's guard (#GUARD) and idempotency records (IDEMPOTENCY#<digest>), nothing else.
-- remediation: Check `unknown_item_kind` for items still there, and fix the writer (event_id).
-- docs: docs/table.md#keys
-- time: first_seen_at
-- clock: stream
-- One row per item (pk, sk) of an unknown kind that any change in the log touched.
SELECT
    user_id,
    item_kind,
    pk,
    sk,
    min(created_at) AS first_seen_at,
    count(*) AS changes,
    bool_or(change_kind = 'REMOVE') AS removed,
    arg_min(event_id, created_at) AS event_id
FROM changes
WHERE item_kind IS NULL OR NOT list_contains(getvariable('audit_known_item_kinds'), item_kind)
GROUP BY user_id, item_kind, pk, sk
ORDER BY pk, sk
