-- audit: unknown_item_kind
-- scope: now
-- title: Items of an unknown kind
-- invariant: the table holds entitlement rows (ENTITLEMENT#<account>), the cancellation record (CLEANUP#CANCELLATION) and stale-account records (CLEANUP#STALE#<account>), the service's guard (#GUARD) and idempotency records (IDEMPOTENCY#<digest>), nothing else.
-- remediation: Find the writer (event_id). Delete the item if it is stray; if it is a new kind, add it to the table contract (schema/table.py and docs/table.md) first.
-- docs: docs/table.md#keys
-- time: changed_at
-- clock: stream
-- Every live item now whose sort key is none of the known kinds (audit_known_item_kinds).
SELECT user_id, item_kind, pk, sk, changed_at, event_type, event_id
FROM current_items
WHERE item_kind IS NULL OR NOT list_contains(getvariable('audit_known_item_kinds'), item_kind)
ORDER BY pk, sk
