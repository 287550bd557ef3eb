-- audit: stale_record_removed_not_by_ttl
-- scope: ever
-- title: Stale-account records removed other than by TTL
-- invariant: the stale-account record sits off the cancellation key, which is what stops anything cancelling it: only its TTL expiry removes it, so cleanup deletes the account.
-- remediation: The account it named will never be cleaned up. Unless an erasure removed it (audit with `--erasure-ledger`), write the record again with a ttl of now + STALE_ENTITLEMENT_TTL_DAYS, or delete the account at Array by hand once no Active row uses it.
-- docs: docs/table.md#keys, docs/operations/cleanup.md#what-triggers-a-delete
-- time: removed_at
-- clock: stream
-- Every delete of a stale cleanup record (CLEANUP#STALE#<account>) not made by DynamoDB's TTL, outside
-- the erasure exception.
SELECT
    user_id,
    old_array_account_id AS array_account_id,
    old_ttl_raw AS ttl_raw,
    pk,
    sk,
    created_at AS removed_at,
    event_id
FROM changes
WHERE change_kind = 'REMOVE'
    AND NOT ttl_deletion
    AND item_kind = 'stale'
    AND NOT EXISTS (SELECT 1 FROM audit_erasure_exceptions AS x WHERE x.user_id = changes.user_id)
ORDER BY removed_at, pk, sk
