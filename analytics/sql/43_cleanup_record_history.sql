-- cleanup_record_history: every version of every cleanup record, its removal included (deleted = true;
-- ttl_deletion tells DynamoDB's TTL removal from the service's own delete).
CREATE OR REPLACE VIEW cleanup_record_history AS
SELECT
    user_id,
    array_account_id,
    item_kind AS cleanup_kind,
    ttl,
    ttl_raw,
    ttl_type,
    deleted,
    ttl_deletion,
    valid_from,
    valid_to,
    is_latest,
    change_kind,
    event_type,
    item_created_at,
    item_user_id,
    pk,
    sk,
    stream_arn,
    shard_id,
    sequence_number,
    sequence_key,
    event_id
FROM item_versions
WHERE item_kind IN ('cancellation', 'stale');
