-- changes: one row per stream event, exactly once, whatever was replayed or compacted.
-- Identity: (stream_arn, shard_id, sequence_number). Columns: those of the change log (schema/lake.md)
-- plus event_date. Time axis: created_at is the stream's ApproximateCreationDateTime.
-- Rows of files that overlap no other file cannot be duplicates and pass straight through; rows of
-- overlapping files (change_files_to_dedupe) keep one copy per identity.
CREATE OR REPLACE VIEW changes AS
SELECT * EXCLUDE (filename)
FROM raw_changes
WHERE filename NOT IN (SELECT filename FROM change_files_to_dedupe)
UNION ALL BY NAME
SELECT * EXCLUDE (filename)
FROM raw_changes
WHERE filename IN (SELECT filename FROM change_files_to_dedupe)
QUALIFY row_number() OVER (PARTITION BY stream_arn, shard_id, sequence_number ORDER BY filename) = 1;
