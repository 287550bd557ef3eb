-- audit: unknown_item_kind
-- scope: now, ever
-- invariant: the table holds entitlement rows (ENTITLEMENT#<account>), the cancellation record (CLEANUP#CANCELLATION) and stale-account records (CLEANUP#STALE#<account>), the service's guard (#GUARD) and idempotency records (IDEMPOTENCY#<digest>), nothing else.
-- docs: docs/table.md#keys
-- clock: stream
-- now.title: Items of an unknown kind
-- now.remediation: Find the writer (event_id). Delete the item if it is stray; if it is a new kind, add it to the table contract (schema/table.py and docs/table.md) first.
-- now.time: changed_at
-- now: Every live item now whose sort key is none of the known kinds (audit_known_item_kinds).
-- ever.title: Items of an unknown kind ever written
-- ever.remediation: Check `unknown_item_kind` for items still there, and fix the writer (event_id).
-- ever.time: first_seen_at
-- ever: One row per item (pk, sk) of an unknown kind that any change in the log touched.
WITH now_findings AS (
    SELECT user_id, item_kind, pk, sk, changed_at, event_type, event_id
    FROM current_items
    WHERE item_kind IS NULL OR NOT list_contains(getvariable('audit_known_item_kinds'), item_kind)
    ORDER BY pk, sk
),
ever_findings AS (
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
)
SELECT *
FROM query_table(
    CASE coalesce(getvariable('audit_scope'), 'now')
        WHEN 'now' THEN 'now_findings'
        WHEN 'ever' THEN 'ever_findings'
        ELSE error('audit_scope is now or ever')
    END
)
