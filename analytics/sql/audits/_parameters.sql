-- The audits' inputs, for running an audit by hand from the DuckDB CLI, in any folder (the check's file
-- by its path):
--   duckdb -c "$(entitlements lake views --include audits)" -c ".read <path>/analytics/sql/audits/duplicate_active_rows.sql"
-- Python (analytics.audits.run_audits) sets the same variables from config.PolicySettings,
-- analytics/audits/defaults.toml and schema/ (tests keep these defaults equal to them).
SET VARIABLE audit_as_of = NULL::TIMESTAMPTZ;                -- NULL: the end of the log (latest stream time)
SET VARIABLE audit_cleanup_ttl_days = 63;                    -- CLEANUP_TTL_DAYS
SET VARIABLE audit_stale_ttl_days = 1;                       -- STALE_ENTITLEMENT_TTL_DAYS
SET VARIABLE audit_ttl_tolerance_seconds = 3600;             -- how far a ttl may sit from the policy
SET VARIABLE audit_overlap_tolerance_seconds = 1.0;          -- overlaps this short are one transaction
SET VARIABLE audit_outcome_grace_seconds = 3600;             -- time a processor has to record an outcome
SET VARIABLE audit_known_statuses = ['Active', 'Cancelled', 'Removed', 'Superseded'];
SET VARIABLE audit_known_item_kinds = ['cancellation', 'entitlement', 'guard', 'idempotency', 'stale'];
SET VARIABLE audit_final_outcomes = ['cleanup.already_deleted', 'cleanup.deleted', 'cleanup.failed', 'cleanup.refused_by_guard'];
SET VARIABLE audit_deleted_outcomes = ['cleanup.already_deleted', 'cleanup.deleted'];
-- Which check of a file of both scopes runs: 'now' (duplicate_active_rows.sql is duplicate_active_rows)
-- or 'ever' (duplicate_active_rows_ever).
SET VARIABLE audit_scope = 'now';
-- The erasure exception: users whose deletes an erasure made (empty by default).
CREATE TABLE IF NOT EXISTS audit_erasure_exceptions (user_id VARCHAR NOT NULL);
