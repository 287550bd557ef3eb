-- item_versions: every state each item (pk, sk) went through, in sequence order. One row per change:
-- the item's image after it (for a REMOVE, the image removed, with deleted = true), valid from the
-- change's created_at until the next change's (valid_to NULL for the latest). Stream time throughout.
CREATE OR REPLACE VIEW item_versions AS
SELECT
    pk,
    sk,
    item_kind,
    user_id,
    CASE WHEN has_new_image THEN new_item_user_id ELSE old_item_user_id END AS item_user_id,
    CASE WHEN has_new_image THEN new_array_account_id ELSE old_array_account_id END AS array_account_id,
    CASE WHEN has_new_image THEN new_status ELSE old_status END AS status,
    CASE WHEN has_new_image THEN new_item_created_at ELSE old_item_created_at END AS item_created_at,
    CASE WHEN has_new_image THEN new_item_created_at_ts ELSE old_item_created_at_ts END AS item_created_at_ts,
    CASE WHEN has_new_image THEN new_item_updated_at ELSE old_item_updated_at END AS item_updated_at,
    CASE WHEN has_new_image THEN new_item_updated_at_ts ELSE old_item_updated_at_ts END AS item_updated_at_ts,
    CASE WHEN has_new_image THEN new_gsi1pk ELSE old_gsi1pk END AS gsi1pk,
    CASE WHEN has_new_image THEN new_gsi1sk ELSE old_gsi1sk END AS gsi1sk,
    CASE WHEN has_new_image THEN new_ttl ELSE old_ttl END AS ttl,
    CASE WHEN has_new_image THEN new_ttl_raw ELSE old_ttl_raw END AS ttl_raw,
    CASE WHEN has_new_image THEN new_ttl_type ELSE old_ttl_type END AS ttl_type,
    change_kind = 'REMOVE' AS deleted,
    created_at AS valid_from,
    lead(created_at) OVER w AS valid_to,
    lead(sequence_key) OVER w IS NULL AS is_latest,
    stream_arn,
    shard_id,
    sequence_number,
    sequence_key,
    event_id,
    event_type,
    change_kind,
    ttl_deletion,
    event_date
FROM changes
WINDOW w AS (PARTITION BY pk, sk ORDER BY sequence_key, stream_arn, shard_id);
