-- snapshot_items: the table as of the last `entitlements snapshot` run (the current version of the
-- `snapshots/state` Delta table; see analytics/lake/snapshots.py). Same columns as current_items. The
-- state is a base fold plus delta folds; the latest row per item across them is the item's state.
CREATE OR REPLACE VIEW snapshot_items AS
SELECT * EXCLUDE (deleted, folded_version)
FROM (
    SELECT *
    FROM read_parquet(getvariable('state_files'), union_by_name = true) AS s
    WHERE NOT EXISTS (SELECT 1 FROM erased_users AS e WHERE e.user_id = s.user_id)
    QUALIFY row_number() OVER (
        PARTITION BY pk, sk ORDER BY sequence_key DESC, stream_arn DESC, shard_id DESC
    ) = 1
)
WHERE NOT deleted;
