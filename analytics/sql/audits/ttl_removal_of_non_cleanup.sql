-- audit: ttl_removal_of_non_cleanup
-- scope: ever
-- title: TTL removals of anything but a cleanup record
-- invariant: DynamoDB removing the expired record "is the trigger, and the only row it ever takes" (seed 000).
-- time: removed_at
-- Every REMOVE made by DynamoDB's TTL (userIdentity Service/dynamodb.amazonaws.com) of an item that is
-- not a cancellation or stale cleanup record.
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
    AND item_kind NOT IN ('cancellation', 'stale')
ORDER BY removed_at, pk, sk
