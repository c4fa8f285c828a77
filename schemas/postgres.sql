-- The usr table of the 2010 HandlerSocket discussion, as `loadgen prepare` creates it.
-- Rows are derived from the id (see src/dataset.rs) so `loadgen run --verify` can check each one.
DROP TABLE IF EXISTS usr;
CREATE TABLE usr (
    user_id    integer PRIMARY KEY,
    user_name  text NOT NULL,
    user_email text NOT NULL,
    created    timestamp NOT NULL
);
