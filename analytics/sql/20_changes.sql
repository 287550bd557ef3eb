-- changes: one row per stream event, exactly once, whatever was replayed or compacted.
-- Identity: (stream_arn, shard_id, sequence_number). Columns: those of the change log (schema/lake.md)
-- plus event_date. Time axis: created_at is the stream's ApproximateCreationDateTime.
CREATE OR REPLACE VIEW changes AS
SELECT * EXCLUDE (filename)
FROM raw_changes
QUALIFY row_number() OVER (PARTITION BY stream_arn, shard_id, sequence_number ORDER BY filename) = 1;
