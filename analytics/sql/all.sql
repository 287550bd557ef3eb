-- Load every view into the DuckDB CLI, from the repository root, on a local lake:
--   duckdb -c "$(entitlements lake files)" -c ".read analytics/sql/all.sql" -c "FROM entitlements"
-- (`entitlements lake files` prints SET VARIABLE statements naming each Delta table's current files:
-- changes_files, outcomes_files, state_files.)
-- (Python's analytics.views.create_views runs the numbered files itself, in this order.)
.read analytics/sql/00_mask.sql
.read analytics/sql/10_raw_changes.sql
.read analytics/sql/11_raw_outcomes.sql
.read analytics/sql/15_change_files.sql
.read analytics/sql/20_changes.sql
.read analytics/sql/21_outcomes.sql
.read analytics/sql/30_item_versions.sql
.read analytics/sql/31_current_items.sql
.read analytics/sql/40_entitlements.sql
.read analytics/sql/41_cleanup_records.sql
.read analytics/sql/42_entitlement_history.sql
.read analytics/sql/43_cleanup_record_history.sql
.read analytics/sql/50_users.sql
.read analytics/sql/51_array_accounts.sql
.read analytics/sql/60_snapshot_items.sql
