-- audit_failures: every row `entitlements audit --store-failures` kept of a failing check (the Delta
-- table audits/failures under the lake root; analytics/audits/_failures.py), one per finding: the run
-- (audit_id, audited_at, as_of), the check (check_name, scope, status), whose finding it is (user_id,
-- other_user_id, pk) and the finding itself as JSON text (`row`: e.g. "row"->>'array_account_id').
-- Zero rows until an audit stores some. Masked as every view: a user in erased_users is hidden whether
-- the finding is theirs (user_id, pk) or names them (other_user_id). Reads the files of the variable
-- audit_failures_files (as raw_changes). Time axis: audited_at is the audit run's clock.
CREATE OR REPLACE VIEW audit_failures AS
SELECT *
FROM read_parquet(getvariable('audit_failures_files'), union_by_name = true, hive_partitioning = false) AS f
WHERE NOT EXISTS (
    SELECT 1
    FROM erased_users AS e
    WHERE e.user_id = f.user_id OR e.user_id = f.other_user_id OR 'USER#' || e.user_id = f.pk
);
