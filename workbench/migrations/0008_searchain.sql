-- Multi-step pipelines as systems under test (docs/design.md §7): SearChain runs and their trees.
CREATE TABLE pipeline_runs (
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL UNIQUE,
  kind TEXT NOT NULL,             -- searchain
  dataset_id INTEGER NOT NULL REFERENCES datasets(id) ON DELETE CASCADE,
  config TEXT NOT NULL,           -- JSON; a changed config under the same name is refused
  created_at TEXT NOT NULL
);

-- One job per sample, committed whole with its tree.
CREATE TABLE pipeline_samples (
  prun_id INTEGER NOT NULL REFERENCES pipeline_runs(id) ON DELETE CASCADE,
  sid INTEGER NOT NULL,
  status TEXT NOT NULL DEFAULT 'pending',   -- pending | done | error
  error TEXT,
  outcome TEXT,                   -- verified (every step checked) | max_rounds | unparseable
  rounds INTEGER,                 -- feedback rounds (regenerations)
  steps INTEGER,                  -- steps of the final chain
  final_content TEXT,
  prediction TEXT,                -- the answer extracted from the final content
  cover REAL,                     -- cover-EM of the final content
  acc REAL,                       -- acc (any-hit) of the prediction
  n_model INTEGER, n_corrected INTEGER, n_completed INTEGER, n_unchecked INTEGER,
  n_cited INTEGER,                -- final-chain steps cited [n] in the final content with a reference
  baseline_prediction TEXT,       -- plain RAG over the same sample (top-K units, one call)
  baseline_cover REAL,
  baseline_acc REAL,
  seconds REAL,
  finished_at TEXT,
  PRIMARY KEY (prun_id, sid)
);

-- The reasoning tree: one node per distinct step; a regenerated chain is a branch that
-- hangs under the node whose feedback caused it.
CREATE TABLE chain_nodes (
  prun_id INTEGER NOT NULL REFERENCES pipeline_runs(id) ON DELETE CASCADE,
  sid INTEGER NOT NULL,
  node INTEGER NOT NULL,          -- 1.. in creation order; 0 is the question (root, not stored)
  parent INTEGER NOT NULL,
  branch INTEGER NOT NULL,        -- the chain generation that created it (0 = the first)
  query TEXT NOT NULL,
  answer TEXT,                    -- the model's answer (NULL when it marked the step unsolved)
  unsolved INTEGER NOT NULL,
  status TEXT NOT NULL,           -- model (never checked) | verified | corrected | completed
  evidence_uid INTEGER,           -- the top-1 unit the step was checked against
  reader_answer TEXT,
  confidence REAL,
  feedback TEXT,                  -- the message sent back to the model, if any
  in_final INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (prun_id, sid, node)
) WITHOUT ROWID;

CREATE TABLE chain_branches (
  prun_id INTEGER NOT NULL REFERENCES pipeline_runs(id) ON DELETE CASCADE,
  sid INTEGER NOT NULL,
  branch INTEGER NOT NULL,
  from_node INTEGER NOT NULL,     -- the node whose feedback started it (0 for the first chain)
  output TEXT NOT NULL,           -- the model's raw chain
  parse_error TEXT,
  PRIMARY KEY (prun_id, sid, branch)
) WITHOUT ROWID;
