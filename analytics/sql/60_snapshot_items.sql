-- snapshot_items: the table as of the last `entitlements snapshot` run (its state files; see
-- analytics/lake/snapshot.py). Same columns as current_items. Any stray state file left by a crashed
-- run is itself a valid fold, so taking the latest row per item across all of them stays correct.
CREATE OR REPLACE VIEW snapshot_items AS
SELECT * EXCLUDE (deleted)
FROM (
    SELECT *
    FROM read_parquet(getvariable('lake_root') || '/snapshots/state/*.parquet', union_by_name = true) AS s
    WHERE NOT EXISTS (SELECT 1 FROM erased_users AS e WHERE e.user_id = s.user_id)
    QUALIFY row_number() OVER (
        PARTITION BY pk, sk ORDER BY sequence_key DESC, stream_arn DESC, shard_id DESC
    ) = 1
)
WHERE NOT deleted;
