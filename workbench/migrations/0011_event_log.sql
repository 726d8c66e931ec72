-- The incremental ledger (docs/design.md §3 "Incremental"). A ledger state holds, per group of
-- cells of a run, the running sums and the Poisson-bootstrap replicate sums of its terms, valid
-- for every event change up to its watermark. Every later change of a ledger-relevant column
-- is logged with a sequence number (AUTOINCREMENT: never reused, so a watermark never misses a
-- change) and the row's image *before* the change: a reader applies only the changes since its
-- watermark, subtracting the old image's contribution and adding the current row's.
--
-- Changes are logged only for runs that have a ledger state: a run nobody has read yet needs no
-- deltas (its first reader builds the state from scratch), so planning a 5M-event sweep writes
-- no log. A state's header row is created before its builder's snapshot is taken, so no change
-- falls between the snapshot and the log.

-- The per-run array cache and its version counter are replaced by the ledger state.
DROP TRIGGER events_touch;
DROP TABLE run_arrays;
ALTER TABLE runs DROP COLUMN events_version;

CREATE TABLE ledger_states (
  id INTEGER PRIMARY KEY,
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  score TEXT NOT NULL,            -- the scorer the state's scores come from (the run's own, or a re-score)
  seed INTEGER NOT NULL,
  resamples INTEGER NOT NULL,     -- replicate sums kept; fewer are a prefix (weights are per resample)
  watermark INTEGER,              -- event_log.seq the sums include every change up to; NULL while building
  groups TEXT NOT NULL,           -- JSON list of the group keys: a changed grid of cells is rebuilt
  updated_at TEXT NOT NULL,
  UNIQUE (run_id, score, seed)
);

CREATE TABLE ledger_sums (
  state_id INTEGER NOT NULL REFERENCES ledger_states(id) ON DELETE CASCADE,
  grp TEXT NOT NULL,              -- e.g. cell:k5-b128-linear, oracle:128, noise:k5-b128-linear
  sums BLOB NOT NULL,             -- float64[columns]
  replicates BLOB NOT NULL,       -- float64[resamples, columns]
  PRIMARY KEY (state_id, grp)
);

CREATE TABLE event_log (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  run_id INTEGER NOT NULL,
  cell_id TEXT NOT NULL,
  sid INTEGER NOT NULL,
  existed INTEGER NOT NULL,       -- 0: the change inserted the row (no old image)
  h_set INTEGER, h_vis INTEGER, k_eff INTEGER, evidence_tokens INTEGER, truncated INTEGER,
  score REAL, prediction TEXT     -- the old image (prediction: for a state that re-scores)
);
CREATE INDEX event_log_run ON event_log(run_id, seq);

-- The highest seq pruned from the log per run: a reader whose watermark is below it reloads
-- the persisted state (whose watermark is at least this) instead of trusting an incomplete delta.
CREATE TABLE event_log_floor (
  run_id INTEGER PRIMARY KEY REFERENCES runs(id) ON DELETE CASCADE,
  seq INTEGER NOT NULL
);

CREATE TRIGGER events_log_insert AFTER INSERT ON events
WHEN EXISTS (SELECT 1 FROM ledger_states WHERE run_id = NEW.run_id)
BEGIN
  INSERT INTO event_log (run_id, cell_id, sid, existed) VALUES (NEW.run_id, NEW.cell_id, NEW.sid, 0);
END;

CREATE TRIGGER events_log_update
AFTER UPDATE OF h_set, h_vis, k_eff, evidence_tokens, truncated, score, prediction ON events
WHEN (OLD.h_set IS NOT NEW.h_set OR OLD.h_vis IS NOT NEW.h_vis OR OLD.k_eff IS NOT NEW.k_eff
      OR OLD.evidence_tokens IS NOT NEW.evidence_tokens OR OLD.truncated IS NOT NEW.truncated
      OR OLD.score IS NOT NEW.score OR OLD.prediction IS NOT NEW.prediction)
  AND EXISTS (SELECT 1 FROM ledger_states WHERE run_id = NEW.run_id)
BEGIN
  INSERT INTO event_log (run_id, cell_id, sid, existed, h_set, h_vis, k_eff, evidence_tokens, truncated,
                         score, prediction)
  VALUES (OLD.run_id, OLD.cell_id, OLD.sid, 1, OLD.h_set, OLD.h_vis, OLD.k_eff, OLD.evidence_tokens,
          OLD.truncated, OLD.score, OLD.prediction);
END;

-- A run being deleted (its row is already gone while the cascade deletes its events) logs nothing.
CREATE TRIGGER events_log_delete AFTER DELETE ON events
WHEN EXISTS (SELECT 1 FROM ledger_states WHERE run_id = OLD.run_id)
  AND EXISTS (SELECT 1 FROM runs WHERE id = OLD.run_id)
BEGIN
  INSERT INTO event_log (run_id, cell_id, sid, existed, h_set, h_vis, k_eff, evidence_tokens, truncated,
                         score, prediction)
  VALUES (OLD.run_id, OLD.cell_id, OLD.sid, 1, OLD.h_set, OLD.h_vis, OLD.k_eff, OLD.evidence_tokens,
          OLD.truncated, OLD.score, OLD.prediction);
END;
