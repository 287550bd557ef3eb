-- raw_changes: every row of every change-log file, replays included (NOT deduplicated: use `changes`).
-- Adds `event_date` (the Hive partition: UTC date of created_at) and `filename`. Masked.
-- Needs the variable lake_root: SET VARIABLE lake_root = '/path/to/lake';
CREATE OR REPLACE VIEW raw_changes AS
SELECT *
FROM read_parquet(
    getvariable('lake_root') || '/changes/*/*.parquet',
    hive_partitioning = true,
    hive_types = {'event_date': DATE},
    union_by_name = true,
    filename = true
) AS c
WHERE NOT EXISTS (SELECT 1 FROM erased_users AS e WHERE e.user_id = c.user_id);
