-- audit: entitlement_row_with_ttl_ever
-- scope: ever
-- title: Entitlement rows that ever carried a ttl
-- invariant: "a cleanup record, never the entitlement row, carries the TTL": rows are never deleted, and DynamoDB deletes whatever carries an expired ttl.
-- remediation: Check `entitlement_row_with_ttl` for rows still carrying it and `ttl_removal_of_non_cleanup` for rows DynamoDB already deleted; fix the writer that set it.
-- docs: docs/table.md#where-the-ttl-lives
-- time: first_carried_at
-- clock: stream
-- One row per entitlement row that carried a ttl in any version, with the first such version.
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
