-- erased_users: the mask. Every view hides the rows of the user ids in this table (an erasure inserts
-- them before its purge rewrites the files). Empty by default. From Python: create_views(..., mask=ids).
CREATE TABLE IF NOT EXISTS erased_users (user_id VARCHAR NOT NULL);
