-- current_items: the table now, as the log says: the latest image of every item, removed items gone.
-- Same columns as a snapshot's state (schema/lake.md) without `deleted`; changed_at is the stream time
-- of the change that produced the image. From Python, create_views(..., from_snapshot=True) redefines
-- it over the latest snapshot plus the changes not folded yet (same rows, less to read).
CREATE OR REPLACE VIEW current_items AS
SELECT
    pk, sk, item_kind, user_id, item_user_id, array_account_id, status, item_created_at,
    item_created_at_ts, item_updated_at, item_updated_at_ts, gsi1pk, gsi1sk, ttl, ttl_raw, ttl_type,
    valid_from AS changed_at,
    stream_arn, shard_id, sequence_number, sequence_key, event_id, event_type, change_kind
FROM item_versions
WHERE is_latest AND NOT deleted;
