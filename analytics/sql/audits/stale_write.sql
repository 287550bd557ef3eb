-- audit: stale_write
-- scope: ever
-- title: Retired or Removed rows made Active again (stale writes)
-- invariant: a row that stopped being the active one must not be written back: the put would return it to Active.
-- remediation: Put the row back to its previous_status unless the user really uses its account again, and check `cleanup_names_active_account` and `guard_refusals` for the record naming it. Fix the writer (event_type, event_id): every put of an existing row must carry the Active condition (SaveIfActive).
-- docs: docs/table.md#the-services-write-paths
-- time: made_active_at
-- clock: stream
-- Every version that turned an entitlement row Active when its previous version was Superseded or Removed.
-- (Cancelled -> Active is a reactivation and is allowed.)
WITH versions AS (
    SELECT
        *,
        lag(status) OVER w AS previous_status,
        lag(deleted) OVER w AS previous_deleted
    FROM entitlement_history
    WINDOW w AS (PARTITION BY pk, sk ORDER BY sequence_key, stream_arn, shard_id)
)
SELECT
    user_id,
    array_account_id,
    previous_status,
    status,
    pk,
    sk,
    valid_from AS made_active_at,
    event_type,
    event_id
FROM versions
WHERE status = 'Active'
    AND NOT deleted
    AND previous_status IN ('Superseded', 'Removed')
    AND NOT previous_deleted
ORDER BY made_active_at, pk, sk
