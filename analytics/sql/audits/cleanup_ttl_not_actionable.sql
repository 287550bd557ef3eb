-- audit: cleanup_ttl_not_actionable
-- scope: now
-- title: Cleanup records whose ttl DynamoDB would never act on as the policy means
-- invariant: DynamoDB acts only on a ttl that is a top-level Number of epoch seconds; a cleanup record's ttl is its createdAt + CLEANUP_TTL_DAYS (63) after a cancellation, + STALE_ENTITLEMENT_TTL_DAYS (1) after a second signup.
-- remediation: Rewrite the record's ttl as a Number of epoch seconds at expected_ttl (reason says what is wrong: missing, a string, not an integer, milliseconds, off policy). Until then DynamoDB never removes it (or removes it at the wrong time) and the account is not deleted as the policy means.
-- docs: docs/table.md#attributes, docs/operations/cleanup.md#the-two-policy-settings
-- time: changed_at
-- clock: stream
-- Every pending cleanup record whose ttl is missing, a string, not an integral Number, in milliseconds,
-- or further than audit_ttl_tolerance_seconds from its creation + the policy's days (63 for a
-- cancellation record, 1 for a stale record). Creation is the record's createdAt (business time, as the
-- ttl is); a record without one is measured from the stream time of its latest change.
WITH judged AS (
    SELECT
        *,
        CASE cleanup_kind
            WHEN 'cancellation' THEN getvariable('audit_cleanup_ttl_days')
            ELSE getvariable('audit_stale_ttl_days')
        END AS policy_days,
        CAST(epoch(coalesce(try_cast(item_created_at AS TIMESTAMPTZ), changed_at)) AS BIGINT)
            + 86400 * policy_days AS expected_ttl
    FROM cleanup_records
)
SELECT
    user_id,
    cleanup_kind,
    array_account_id,
    ttl_raw,
    ttl_type,
    item_created_at,
    policy_days,
    expected_ttl,
    CASE
        WHEN ttl_raw IS NULL AND ttl_type IS NULL THEN 'missing'
        WHEN ttl_type = 'S' THEN 'string'
        WHEN ttl_type IS DISTINCT FROM 'N' THEN 'not a number'
        WHEN ttl IS NULL THEN 'not an integer'
        WHEN ttl > 99999999999 THEN 'milliseconds'
        ELSE 'off policy'
    END AS reason,
    pk,
    sk,
    changed_at,
    event_id
FROM judged
WHERE ttl_type IS DISTINCT FROM 'N'
    OR ttl IS NULL
    OR ttl > 99999999999
    OR abs(ttl - expected_ttl) > getvariable('audit_ttl_tolerance_seconds')
ORDER BY user_id, sk
