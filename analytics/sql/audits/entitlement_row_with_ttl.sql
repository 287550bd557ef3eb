-- audit: entitlement_row_with_ttl
-- scope: now, ever
-- invariant: "a cleanup record, never the entitlement row, carries the TTL": rows are never deleted, and DynamoDB deletes whatever carries an expired ttl.
-- docs: docs/table.md#where-the-ttl-lives
-- clock: stream
-- now.title: Entitlement rows carrying a ttl
-- now.remediation: Remove the attribute from the row at once (`REMOVE ttl` on its key) before it expires, then find the writer that set it (event_id). Only cleanup records carry a ttl.
-- now.time: changed_at
-- now: Entitlement rows that hold a ttl attribute now, whatever its type.
-- ever.title: Entitlement rows that ever carried a ttl
-- ever.remediation: Check `entitlement_row_with_ttl` for rows still carrying it and `ttl_removal_of_non_cleanup` for rows DynamoDB already deleted; fix the writer that set it.
-- ever.time: first_carried_at
-- ever: One row per entitlement row that carried a ttl in any version, with the first such version.
WITH now_findings AS (
    SELECT user_id, array_account_id, status, ttl_raw, ttl_type, pk, sk, changed_at, event_id
    FROM entitlements
    WHERE ttl_raw IS NOT NULL OR ttl_type IS NOT NULL
    ORDER BY user_id, sk
),
ever_findings AS (
    SELECT
        user_id,
        array_account_id,
        pk,
        sk,
        min(valid_from) AS first_carried_at,
        arg_min(ttl_raw, valid_from) AS first_ttl_raw,
        arg_min(ttl_type, valid_from) AS first_ttl_type,
        count(*) AS versions_with_ttl
    FROM entitlement_history
    WHERE NOT deleted AND (ttl_raw IS NOT NULL OR ttl_type IS NOT NULL)
    GROUP BY user_id, array_account_id, pk, sk
    ORDER BY user_id, sk
)
SELECT *
FROM query_table(
    CASE coalesce(getvariable('audit_scope'), 'now')
        WHEN 'now' THEN 'now_findings'
        WHEN 'ever' THEN 'ever_findings'
        ELSE error('audit_scope is now or ever')
    END
)
