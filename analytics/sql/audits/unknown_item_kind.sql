-- audit: unknown_item_kind
-- scope: now
-- title: Items of an unknown kind
-- invariant: the table holds entitlement rows (ENTITLEMENT#<account>), the cancellation record (CLEANUP#CANCELLATION) and stale records (CLEANUP#STALE#<account>) (schema.table).
-- time: changed_at
-- Every live item now whose sort key is none of the known kinds (audit_known_item_kinds).
SELECT user_id, item_kind, pk, sk, changed_at, event_type, event_id
FROM current_items
WHERE item_kind IS NULL OR NOT list_contains(getvariable('audit_known_item_kinds'), item_kind)
ORDER BY pk, sk
