-- A run's events as numpy arrays, cached so a large ledger loads without scanning events.
-- events_version moves whenever an event changes (trigger), which invalidates the cache.
ALTER TABLE runs ADD COLUMN events_version INTEGER NOT NULL DEFAULT 0;

CREATE TRIGGER events_touch AFTER UPDATE ON events
BEGIN
  UPDATE runs SET events_version = events_version + 1 WHERE id = NEW.run_id;
END;

CREATE TABLE run_arrays (
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  cell_id TEXT NOT NULL,
  version INTEGER NOT NULL,     -- runs.events_version the arrays were built at
  n INTEGER NOT NULL,
  sids BLOB NOT NULL,           -- int32[n], the run's samples in sid order
  ints BLOB NOT NULL,           -- int32[5, n]: h_set, h_vis, k_eff, evidence_tokens, truncated
  scores BLOB NOT NULL,         -- float64[n], NaN = not scored
  PRIMARY KEY (run_id, cell_id)
);
