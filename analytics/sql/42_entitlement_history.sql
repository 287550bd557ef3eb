-- entitlement_history: every version of every entitlement row (item_versions of kind 'entitlement'),
-- for questions about the past: e.g. two Active rows of one user whose [valid_from, valid_to) overlap.
CREATE OR REPLACE VIEW entitlement_history AS
SELECT
    user_id,
    array_account_id,
    status,
    deleted,
    valid_from,
    valid_to,
    is_latest,
    change_kind,
    event_type,
    item_created_at,
    item_updated_at,
    ttl,
    ttl_raw,
    ttl_type,
    item_user_id,
    pk,
    sk,
    stream_arn,
    shard_id,
    sequence_number,
    sequence_key,
    event_id
FROM item_versions
WHERE item_kind = 'entitlement';
