-- Datasets, units (triples or chunks), samples and retrieval runs: docs/design.md §2.
CREATE TABLE datasets (
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL UNIQUE,
  unit_kind TEXT NOT NULL CHECK (unit_kind IN ('triple', 'chunk')),
  source TEXT,
  content_sha256 TEXT NOT NULL,   -- of the imported files, so a re-import of the same files is a no-op
  created_at TEXT NOT NULL
);

-- uid is the dataset-local ordinal that labels the unit in prompts: T{uid} / C{uid}.
CREATE TABLE units (
  dataset_id INTEGER NOT NULL REFERENCES datasets(id) ON DELETE CASCADE,
  uid INTEGER NOT NULL,
  key TEXT NOT NULL,              -- normalized identity (NFKC, whitespace collapsed): "h\tr\tt" or the chunk id
  head TEXT, relation TEXT, tail TEXT,
  chunk_id TEXT, doc_id TEXT, text TEXT,
  in_kb INTEGER NOT NULL DEFAULT 1,  -- 0: referenced by a gold path or a retriever but absent from kb.jsonl
  PRIMARY KEY (dataset_id, uid)
);
CREATE UNIQUE INDEX units_key ON units(dataset_id, key);

CREATE TABLE samples (
  dataset_id INTEGER NOT NULL REFERENCES datasets(id) ON DELETE CASCADE,
  sid INTEGER NOT NULL,           -- dataset-local ordinal (line order)
  id TEXT NOT NULL,
  question TEXT NOT NULL,
  answers TEXT NOT NULL,          -- JSON list of str
  aliases TEXT NOT NULL DEFAULT '{}',
  gold_paths TEXT NOT NULL,       -- JSON list of lists of uids
  meta TEXT NOT NULL DEFAULT '{}',
  PRIMARY KEY (dataset_id, sid)
);
CREATE UNIQUE INDEX samples_id ON samples(dataset_id, id);

CREATE TABLE retrievals (
  dataset_id INTEGER NOT NULL,
  retriever TEXT NOT NULL,
  sid INTEGER NOT NULL,
  uids TEXT NOT NULL,             -- JSON list of uids, rank order
  scores TEXT NOT NULL,           -- JSON list of floats, same order
  PRIMARY KEY (dataset_id, retriever, sid),
  FOREIGN KEY (dataset_id, sid) REFERENCES samples(dataset_id, sid) ON DELETE CASCADE
);

-- A run is a dataset x retriever x grid of cells (x a model, once generation exists).
CREATE TABLE runs (
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL UNIQUE,
  dataset_id INTEGER NOT NULL REFERENCES datasets(id) ON DELETE CASCADE,
  retriever TEXT,
  config TEXT NOT NULL,           -- JSON; a changed config under the same name is refused
  model TEXT,                     -- NULL while nothing generated; 'external' for imported predictions
  created_at TEXT NOT NULL
);

CREATE TABLE cells (
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  cell_id TEXT NOT NULL,
  kind TEXT NOT NULL CHECK (kind IN ('retrieval', 'oracle')),
  k INTEGER,                      -- NULL for oracle cells
  budget INTEGER NOT NULL,
  format TEXT NOT NULL,
  shuffle INTEGER,                -- oracle linear shuffle index m, else NULL
  PRIMARY KEY (run_id, cell_id)
);

-- Identical truncated evidence is stored once; cells that share it render the same prompt.
CREATE TABLE evidence (
  sha256 TEXT PRIMARY KEY,
  text TEXT NOT NULL
);

CREATE TABLE events (
  run_id INTEGER NOT NULL,
  cell_id TEXT NOT NULL,
  sid INTEGER NOT NULL,
  h_set INTEGER NOT NULL,
  h_vis INTEGER NOT NULL,
  k_eff INTEGER NOT NULL,
  evidence_tokens INTEGER NOT NULL,
  truncated INTEGER NOT NULL,
  evidence_sha256 TEXT NOT NULL REFERENCES evidence(sha256),
  visible TEXT NOT NULL,          -- JSON list of visible uids, window order
  prediction TEXT,
  score REAL,                     -- NULL until generated or imported
  PRIMARY KEY (run_id, cell_id, sid),
  FOREIGN KEY (run_id, cell_id) REFERENCES cells(run_id, cell_id) ON DELETE CASCADE
);
