-- change_files: one row per data file of the `changes` table holding rows, from Parquet footers only
-- (no data read): its rows and the ranges of stream, shard and sequence key it holds.
-- change_files_to_dedupe: the files whose ranges overlap another file's. Only their rows can be
-- duplicates (a replay or a compaction that died before deleting its inputs): `changes` deduplicates
-- those and passes every other row straight through. Overlap is judged conservatively (a compacted file
-- spans several shards; a file without statistics could overlap any other, so then every file counts).
CREATE OR REPLACE VIEW change_files AS
SELECT
    file_name AS filename,
    sum(num_values) FILTER (WHERE path_in_schema = 'sequence_key') AS rows,
    min(stats_min_value) FILTER (WHERE path_in_schema = 'sequence_key') AS first_key,
    max(stats_max_value) FILTER (WHERE path_in_schema = 'sequence_key') AS last_key,
    min(stats_min_value) FILTER (WHERE path_in_schema = 'shard_id') AS first_shard,
    max(stats_max_value) FILTER (WHERE path_in_schema = 'shard_id') AS last_shard,
    min(stats_min_value) FILTER (WHERE path_in_schema = 'stream_arn') AS first_stream,
    max(stats_max_value) FILTER (WHERE path_in_schema = 'stream_arn') AS last_stream
FROM parquet_metadata(getvariable('changes_files'))
GROUP BY file_name
HAVING sum(num_values) FILTER (WHERE path_in_schema = 'sequence_key') > 0;

CREATE OR REPLACE VIEW change_files_to_dedupe AS
SELECT a.filename
FROM change_files AS a
JOIN change_files AS b
    ON a.first_key <= b.last_key
    AND b.first_key <= a.last_key
    AND a.filename <> b.filename
WHERE a.first_shard <= b.last_shard
    AND b.first_shard <= a.last_shard
    AND a.first_stream <= b.last_stream
    AND b.first_stream <= a.last_stream
UNION
SELECT filename
FROM change_files
WHERE EXISTS (
    SELECT 1
    FROM change_files
    WHERE first_key IS NULL OR last_key IS NULL OR first_shard IS NULL OR last_shard IS NULL
        OR first_stream IS NULL OR last_stream IS NULL
);
