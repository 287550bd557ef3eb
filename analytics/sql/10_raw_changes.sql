-- raw_changes: every row of the `changes` Delta table's current version, replays included (NOT
-- deduplicated: use `changes`). Adds `event_date` (the partition: UTC date of created_at) and `filename`.
-- Masked. Reads the files the Delta log names as current: the variable changes_files, a list of file
-- URIs (a zero-row schema anchor first), set by analytics.lake.views (from the CLI: schema/lake.md).
CREATE OR REPLACE VIEW raw_changes AS
SELECT *
FROM read_parquet(
    getvariable('changes_files'),
    hive_partitioning = true,
    hive_types = {'event_date': DATE},
    union_by_name = true,
    filename = true
) AS c
WHERE NOT EXISTS (SELECT 1 FROM erased_users AS e WHERE e.user_id = c.user_id);
