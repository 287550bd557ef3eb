-- audit: cleanup_ttl_not_actionable
-- scope: now, ever
-- invariant: DynamoDB acts only on a ttl that is a top-level Number of epoch seconds; a cleanup record's ttl is its createdAt + CLEANUP_TTL_DAYS (63) after a cancellation, + STALE_ENTITLEMENT_TTL_DAYS (1) after a second signup.
-- docs: docs/table.md#attributes, docs/operations/cleanup.md#the-two-policy-settings
-- clock: stream
-- now.title: Cleanup records whose ttl DynamoDB would never act on as the policy means
-- now.remediation: Rewrite the record's ttl as a Number of epoch seconds at expected_ttl (reason says what is wrong: missing, a string, not an integer, milliseconds, off policy). Until then DynamoDB never removes it (or removes it at the wrong time) and the account is not deleted as the policy means.
-- now.time: changed_at
-- now: Every pending cleanup record whose ttl is missing, a string, not an integral Number, in milliseconds,
-- now: or further than audit_ttl_tolerance_seconds from its creation + the policy's days (63 for a
-- now: cancellation record, 1 for a stale record). Creation is the record's createdAt (business time, as the
-- now: ttl is); a record without one is measured from the stream time of its latest change.
-- ever.title: Cleanup records that ever held a ttl DynamoDB would never act on as the policy means
-- ever.remediation: Check `cleanup_ttl_not_actionable` for records still wrong, and fix the writer (event_id) that wrote this ttl.
-- ever.time: first_written_at
-- ever: As cleanup_ttl_not_actionable, over every ttl any cleanup record was ever written with: one row per
-- ever: record and ttl value, with the stream time it was first written.
WITH written AS (
    -- The rows each scope judges, told apart by scope: now, every record as it stands (dated by its latest
    -- change); ever, every ttl a record was ever written with (dated by when it was first written). Each
    -- findings CTE keeps one scope's rows, and DuckDB then prunes the other branch before reading it.
    SELECT
        'now' AS scope, user_id, cleanup_kind, array_account_id, pk, sk, ttl, ttl_raw, ttl_type, item_created_at,
        changed_at AS written_at, event_id
    FROM cleanup_records
    UNION ALL
    SELECT
        'ever' AS scope, user_id, cleanup_kind, array_account_id, pk, sk, ttl, ttl_raw, ttl_type, item_created_at,
        min(valid_from) AS written_at, arg_min(event_id, valid_from) AS event_id
    FROM cleanup_record_history
    WHERE NOT deleted
    GROUP BY ALL
),
judged AS (
    WITH measured AS (
        SELECT
            *,
            CASE cleanup_kind
                WHEN 'cancellation' THEN getvariable('audit_cleanup_ttl_days')
                ELSE getvariable('audit_stale_ttl_days')
            END AS policy_days,
            CAST(epoch(coalesce(try_cast(item_created_at AS TIMESTAMPTZ), written_at)) AS BIGINT)
                + 86400 * policy_days AS expected_ttl
        FROM written
    )
    -- In the findings' column order: each scope renames written_at and drops scope.
    SELECT
        scope,
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
        written_at,
        event_id
    FROM measured
    WHERE ttl_type IS DISTINCT FROM 'N'
        OR ttl IS NULL
        OR ttl > 99999999999
        OR abs(ttl - expected_ttl) > getvariable('audit_ttl_tolerance_seconds')
),
now_findings AS (
    SELECT * EXCLUDE (scope) RENAME (written_at AS changed_at)
    FROM judged
    WHERE scope = 'now'
    ORDER BY user_id, sk
),
ever_findings AS (
    SELECT * EXCLUDE (scope) RENAME (written_at AS first_written_at)
    FROM judged
    WHERE scope = 'ever'
    ORDER BY user_id, sk, first_written_at
)
SELECT *
FROM query_table(
    CASE coalesce(getvariable('audit_scope'), 'now')
        WHEN 'now' THEN 'now_findings'
        WHEN 'ever' THEN 'ever_findings'
        ELSE error('audit_scope is now or ever')
    END
)
