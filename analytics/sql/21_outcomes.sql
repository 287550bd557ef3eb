-- outcomes: one row per processor outcome (schema/outcomes.py), exactly once. Identity: outcome_id, and
-- for a final outcome of an expired cleanup (source event, final): an expiry has one final outcome, also
-- across crash replays (the replay's repeat delete answers 404: already deleted). Of two, the view keeps
-- the first in final_outcome_rank (schema.outcomes.FINAL_OUTCOME_PRECEDENCE): deleted > already_deleted >
-- refused_by_guard > failed. The identity is applied here whatever the rows' outcome_id (lakes written
-- before final outcomes shared one id hold one per kind and attempt).
-- Time axis: occurred_at is the processor's clock (simulated in demos).
CREATE OR REPLACE MACRO final_outcome_rank(kind) AS
    list_position(['cleanup.deleted', 'cleanup.already_deleted', 'cleanup.refused_by_guard', 'cleanup.failed'], kind);

CREATE OR REPLACE VIEW outcomes AS
SELECT * EXCLUDE (filename)
FROM raw_outcomes
QUALIFY row_number() OVER (
    PARTITION BY CASE
        WHEN source_event_id IS NOT NULL AND final_outcome_rank(kind) IS NOT NULL
            THEN 'final|' || source_event_id
        ELSE outcome_id
    END
    ORDER BY final_outcome_rank(kind) NULLS LAST, filename
) = 1;
