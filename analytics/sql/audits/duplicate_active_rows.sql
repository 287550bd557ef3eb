-- audit: duplicate_active_rows
-- scope: now
-- title: Users with more than one Active row
-- invariant: no write leaves "the user with two active rows": a link writes only while the row is Active (SaveIfActive), a second signup retires the old row in the same transaction that writes the new one.
-- remediation: Keep Active the row naming the account the user uses now (the newest link) and retire the other as a second signup does: set it Superseded and write a stale-account record naming its account, so cleanup deletes that account. Then find the write that made the second row Active (its event_id; `stale_write` often names it).
-- docs: docs/table.md#the-services-write-paths, docs/table.md#statuses
-- group_by: user_id
-- time: changed_at
-- clock: stream
-- Every Active entitlement row of a user who has more than one now. Groups are users, surplus rows are
-- the Active rows beyond one per user, rows involved are all of them. (The Active rows are read once and
-- kept, then grouped and joined with the users found: a second scan of the state would cost more than
-- keeping them, and a window over them sorts every row.)
WITH active AS MATERIALIZED (
    SELECT
        user_id,
        array_account_id,
        status,
        pk,
        sk,
        item_created_at,
        item_updated_at,
        changed_at,
        event_id
    FROM entitlements
    WHERE status = 'Active'
)
SELECT *
FROM active
WHERE user_id IN (SELECT user_id FROM active GROUP BY user_id HAVING count(*) > 1)
ORDER BY user_id, sk
