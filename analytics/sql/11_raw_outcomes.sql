-- raw_outcomes: every row of every outcomes file, replays included (NOT deduplicated: use `outcomes`).
-- `event_date` is the UTC date of occurred_at. Masked.
CREATE OR REPLACE VIEW raw_outcomes AS
SELECT *
FROM read_parquet(
    getvariable('lake_root') || '/outcomes/*/*.parquet',
    hive_partitioning = true,
    hive_types = {'event_date': DATE},
    union_by_name = true,
    filename = true
) AS o
WHERE NOT EXISTS (SELECT 1 FROM erased_users AS e WHERE e.user_id = o.user_id);
