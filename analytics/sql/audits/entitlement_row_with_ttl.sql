-- audit: entitlement_row_with_ttl
-- scope: now
-- title: Entitlement rows carrying a ttl
-- invariant: "a cleanup record, never the entitlement row, carries the TTL": rows are never deleted, and DynamoDB deletes whatever carries an expired ttl.
-- remediation: Remove the attribute from the row at once (`REMOVE ttl` on its key) before it expires, then find the writer that set it (event_id). Only cleanup records carry a ttl.
-- docs: docs/table.md#where-the-ttl-lives
-- time: changed_at
-- clock: stream
-- Entitlement rows that hold a ttl attribute now, whatever its type.
SELECT user_id, array_account_id, status, ttl_raw, ttl_type, pk, sk, changed_at, event_id
FROM entitlements
WHERE ttl_raw IS NOT NULL OR ttl_type IS NOT NULL
ORDER BY user_id, sk
