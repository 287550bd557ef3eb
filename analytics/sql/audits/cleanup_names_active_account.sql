-- audit: cleanup_names_active_account
-- scope: now
-- title: Cleanup records naming an Array account an Active row uses
-- invariant: "a record can never name the account in use": a cleanup record schedules the delete of an account no Active row uses.
-- remediation: At expiry cleanup would delete an account in use; its in-use guard refuses and records `cleanup.refused_by_guard`. Decide which is right: if the user uses the account, delete the cleanup record (pk, sk); if the row should not be Active (a `stale_write`), set it back to its earlier status and let the record expire.
-- docs: docs/operations/cleanup.md#the-in-use-guard-the-designs-order-and-ours, docs/table.md#the-services-write-paths
-- time: changed_at
-- clock: stream
-- Every pending cleanup record whose Array account is the account of an Active entitlement row now.
SELECT
    c.user_id,
    c.cleanup_kind,
    c.array_account_id,
    c.ttl_raw,
    c.pk,
    c.sk,
    e.user_id AS row_user_id,
    e.sk AS row_sk,
    c.changed_at,
    c.event_id
FROM cleanup_records AS c
JOIN entitlements AS e ON e.array_account_id = c.array_account_id AND e.status = 'Active'
ORDER BY c.user_id, c.sk, e.sk
