-- raw_outcomes: every row of the `outcomes` Delta table's current version, replays included (NOT
-- deduplicated: use `outcomes`). `event_date` is the UTC date of occurred_at. Masked. Reads the files
-- of the variable outcomes_files (as raw_changes).
CREATE OR REPLACE VIEW raw_outcomes AS
SELECT *
FROM read_parquet(
    getvariable('outcomes_files'),
    hive_partitioning = true,
    hive_types = {'event_date': DATE},
    union_by_name = true,
    filename = true
) AS o
WHERE NOT EXISTS (SELECT 1 FROM erased_users AS e WHERE e.user_id = o.user_id);
