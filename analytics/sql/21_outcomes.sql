-- outcomes: one row per processor outcome (schema/outcomes.py), exactly once. Identity: outcome_id.
-- Time axis: occurred_at is the processor's clock (simulated in demos).
CREATE OR REPLACE VIEW outcomes AS
SELECT * EXCLUDE (filename)
FROM raw_outcomes
QUALIFY row_number() OVER (PARTITION BY outcome_id ORDER BY filename) = 1;
