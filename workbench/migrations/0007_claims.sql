-- Claim verification (docs/design.md §6): a claim run is one verification config over one run.
CREATE TABLE claim_runs (
  id INTEGER PRIMARY KEY,
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  config_key TEXT NOT NULL,       -- sha256 of the canonical config JSON
  config TEXT NOT NULL,           -- decomposer, verifiers, thresholds, tie policy, model
  created_at TEXT NOT NULL,
  UNIQUE (run_id, config_key)
);

-- One job per verified answer: a done event of the run. Committed whole, one transaction each.
CREATE TABLE claim_jobs (
  claim_run_id INTEGER NOT NULL REFERENCES claim_runs(id) ON DELETE CASCADE,
  cell_id TEXT NOT NULL,
  sid INTEGER NOT NULL,
  status TEXT NOT NULL DEFAULT 'pending',   -- pending | done | error
  error TEXT,
  n_claims INTEGER,
  n_supported INTEGER,
  support_ratio REAL,             -- NULL when the answer has no claims (undefined)
  rejected INTEGER,
  filtered_answer TEXT,
  metrics TEXT,                   -- JSON: the RAGChecker-style per-sample metrics (null = undefined)
  finished_at TEXT,
  PRIMARY KEY (claim_run_id, cell_id, sid)
);
CREATE INDEX claim_jobs_status ON claim_jobs(claim_run_id, status);

CREATE TABLE claims (
  claim_run_id INTEGER NOT NULL REFERENCES claim_runs(id) ON DELETE CASCADE,
  cell_id TEXT NOT NULL,
  sid INTEGER NOT NULL,
  idx INTEGER NOT NULL,           -- order in the answer
  text TEXT NOT NULL,
  span_start INTEGER,             -- answer[span_start:span_end] is the clause it came from; NULL if not located
  span_end INTEGER,
  source TEXT NOT NULL,           -- rule | llm | item (of a list answer)
  supported INTEGER NOT NULL,     -- the vote: some shown unit supports it
  correct INTEGER NOT NULL,       -- it contains a gold answer or alias
  best_uid INTEGER,               -- attribution: the best supporting unit (NULL when unsupported)
  best_score REAL,
  PRIMARY KEY (claim_run_id, cell_id, sid, idx)
);

-- The claim x unit verdict table: every verifier's own verdict, and the vote per unit.
CREATE TABLE claim_verdicts (
  claim_run_id INTEGER NOT NULL REFERENCES claim_runs(id) ON DELETE CASCADE,
  cell_id TEXT NOT NULL,
  sid INTEGER NOT NULL,
  idx INTEGER NOT NULL,
  uid INTEGER NOT NULL,
  verifier TEXT NOT NULL,         -- lexical | embedding | llm_judge | nli | vote
  supported INTEGER NOT NULL,
  score REAL NOT NULL,
  PRIMARY KEY (claim_run_id, cell_id, sid, idx, uid, verifier)
) WITHOUT ROWID;
