-- audit: unexpected_delete
-- scope: ever
-- title: Deletes the service never makes
-- invariant: deleting the cancellation record on reactivation is the only delete the service performs; entitlement rows are never deleted; an erasure is the one exception.
-- remediation: If these were erasures, audit with `--erasure-ledger` (or `--erased-users FILE`) so they are excepted. Otherwise write the item back from its last image in the lake (`item_versions`) and find what deleted it (the change's event_id; the service never does).
-- docs: docs/system-context/entitlements-service.md#rows-are-never-deleted-with-one-exception, docs/operations/erasure.md#how-the-audits-recognise-an-erasure-delete-the-ledger
-- time: removed_at
-- clock: stream
-- Every delete that was not made by TTL, of anything but a cancellation record, outside the erasure
-- exception (audit_erasure_exceptions: the users an erasure removed, empty by default). With
-- ttl_removal_of_non_cleanup and stale_record_removed_not_by_ttl it covers every delete other than the
-- service's delete of a cancellation record or TTL's removal of a cleanup record, each delete in one check.
SELECT
    user_id,
    item_kind,
    old_array_account_id AS array_account_id,
    old_status AS status,
    pk,
    sk,
    created_at AS removed_at,
    event_id
FROM changes
WHERE change_kind = 'REMOVE'
    AND NOT ttl_deletion
    AND item_kind NOT IN ('cancellation', 'stale')
    AND NOT EXISTS (SELECT 1 FROM audit_erasure_exceptions AS x WHERE x.user_id = changes.user_id)
ORDER BY removed_at, pk, sk
