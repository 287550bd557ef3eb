-- entitlements: the entitlement rows now (one per user and Array account; rows are never deleted except
-- by an erasure). known_status says whether status is one of the four the contract knows.
CREATE OR REPLACE VIEW entitlements AS
SELECT
    user_id,
    array_account_id,
    status,
    status IN ('Active', 'Superseded', 'Cancelled', 'Removed') AS known_status,
    item_created_at,
    item_updated_at,
    ttl,
    ttl_raw,
    ttl_type,
    item_user_id,
    gsi1pk,
    gsi1sk,
    pk,
    sk,
    changed_at,
    sequence_key,
    event_id
FROM current_items
WHERE item_kind = 'entitlement';
