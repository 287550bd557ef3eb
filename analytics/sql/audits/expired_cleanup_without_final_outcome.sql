-- audit: expired_cleanup_without_final_outcome
-- scope: ever
-- title: Expired cleanups that never reached a final outcome
-- invariant: once DynamoDB removes an expired cleanup record, cleanup deletes the Array account it names; every expiry ends in one final outcome (deleted, already deleted, failed or refused by the guard).
-- remediation: Finish the work still pending: `entitlements cleanup retry-worker --drain` (parked cleanups), `entitlements replay-parked` (parked windows) and, after a fix, `entitlements dead-letter redrive` (expiries naming no account). Then audit again; an expiry still listed needs its account deleted by hand.
-- docs: docs/operations/cleanup.md#parking-the-retry-queue-and-its-worker, docs/operations/consumer.md#commands, docs/operations/cleanup.md#outcomes
-- time: expired_at
-- clock: stream
-- Every TTL removal of a cleanup record, older than audit_outcome_grace_seconds before the audit's
-- instant (audit_as_of, else the latest stream time in the log), with no final outcome
-- (audit_final_outcomes) answering it (outcomes.source_event_id = the removal's event_id).
-- outcomes_seen lists what was recorded instead.
SELECT
    h.user_id,
    h.cleanup_kind,
    h.array_account_id,
    h.pk,
    h.sk,
    h.valid_from AS expired_at,
    (
        SELECT string_agg(DISTINCT o.kind, ', ' ORDER BY o.kind)
        FROM outcomes AS o
        WHERE o.source_event_id = h.event_id
    ) AS outcomes_seen,
    h.event_id
FROM cleanup_record_history AS h
WHERE h.deleted
    AND h.ttl_deletion
    AND epoch(h.valid_from) + getvariable('audit_outcome_grace_seconds') <= epoch(
        coalesce(getvariable('audit_as_of'), (SELECT max(created_at) FROM raw_changes))
    )
    AND NOT EXISTS (
        SELECT 1
        FROM outcomes AS o
        WHERE o.source_event_id = h.event_id AND list_contains(getvariable('audit_final_outcomes'), o.kind)
    )
ORDER BY expired_at, h.pk, h.sk
