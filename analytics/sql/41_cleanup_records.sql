-- cleanup_records: the cleanup records now (cancellation: one per user, 63-day grace; stale: one per
-- superseded Array account). expires_at is the ttl read as DynamoDB's TTL reads it (a Number of epoch
-- seconds); NULL when DynamoDB would never act on it (a string, or a value in milliseconds).
CREATE OR REPLACE VIEW cleanup_records AS
SELECT
    user_id,
    array_account_id,
    item_kind AS cleanup_kind,
    ttl,
    ttl_raw,
    ttl_type,
    CASE
        WHEN ttl_type = 'N' AND ttl BETWEEN 0 AND 99999999999 THEN to_timestamp(ttl)
    END AS expires_at,
    item_created_at,
    item_user_id,
    pk,
    sk,
    changed_at,
    sequence_key,
    event_id
FROM current_items
WHERE item_kind IN ('cancellation', 'stale');
