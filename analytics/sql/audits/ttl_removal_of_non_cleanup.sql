-- audit: ttl_removal_of_non_cleanup
-- scope: ever
-- title: TTL removals of anything but a cleanup record
-- invariant: DynamoDB's TTL removing an expired cleanup record is the trigger of cleanup, and the only item TTL ever takes, besides the service's idempotency records (their expiry triggers nothing).
-- remediation: The item is gone from the table. For an entitlement row, write it back from its last image (`item_versions` in the lake, before removed_at) without the ttl; then clear the ttl of any other row carrying one (`entitlement_row_with_ttl`).
-- docs: docs/table.md#where-the-ttl-lives, docs/system-context/entitlements-service.md#rows-are-never-deleted-with-one-exception
-- time: removed_at
-- clock: stream
-- Every REMOVE made by DynamoDB's TTL (userIdentity Service/dynamodb.amazonaws.com) of an item that is
-- not a cancellation or stale cleanup record, nor an idempotency record (IDEMPOTENCY#<digest>: the first
-- answer to a keyed request, kept until its ttl; docs/table.md#idempotency-records).
SELECT
    user_id,
    item_kind,
    old_array_account_id AS array_account_id,
    old_status AS status,
    pk,
    sk,
    created_at AS removed_at,
    event_id
FROM changes
WHERE change_kind = 'REMOVE'
    AND ttl_deletion
    AND item_kind NOT IN ('cancellation', 'stale', 'idempotency')
ORDER BY removed_at, pk, sk
