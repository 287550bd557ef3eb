-- audit: cleanup_ttl_not_actionable_ever
-- scope: ever
-- title: Cleanup records that ever held a ttl DynamoDB would never act on as the policy means
-- invariant: DynamoDB acts only on a ttl that is a top-level Number of epoch seconds; a cleanup record's ttl is its createdAt + CLEANUP_TTL_DAYS (63) after a cancellation, + STALE_ENTITLEMENT_TTL_DAYS (1) after a second signup.
-- remediation: Check `cleanup_ttl_not_actionable` for records still wrong, and fix the writer (event_id) that wrote this ttl.
-- docs: docs/table.md#attributes, docs/operations/cleanup.md#the-two-policy-settings
-- time: first_written_at
-- clock: stream
-- As cleanup_ttl_not_actionable, over every ttl any cleanup record was ever written with: one row per
-- record and ttl value, with the stream time it was first written.
WITH written AS (
    SELECT
        user_id,
        cleanup_kind,
        array_account_id,
        pk,
        sk,
        ttl,
        ttl_raw,
        ttl_type,
        item_created_at,
        min(valid_from) AS first_written_at,
        arg_min(event_id, valid_from) AS event_id
    FROM cleanup_record_history
    WHERE NOT deleted
    GROUP BY ALL
),
judged AS (
    SELECT
        *,
        CASE cleanup_kind
            WHEN 'cancellation' THEN getvariable('audit_cleanup_ttl_days')
            ELSE getvariable('audit_stale_ttl_days')
        END AS policy_days,
        CAST(epoch(coalesce(try_cast(item_created_at AS TIMESTAMPTZ), first_written_at)) AS BIGINT)
            + 86400 * policy_days AS expected_ttl
    FROM written
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
    first_written_at,
    event_id
FROM judged
WHERE ttl_type IS DISTINCT FROM 'N'
    OR ttl IS NULL
    OR ttl > 99999999999
    OR abs(ttl - expected_ttl) > getvariable('audit_ttl_tolerance_seconds')
ORDER BY user_id, sk, first_written_at
