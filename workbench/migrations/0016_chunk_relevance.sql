-- LLM-judged chunk relevance (docs/design.md §5, issue 28): the local model says whether each chunk a
-- retriever ranked in its top k is relevant to the question; judged precision and nDCG sit beside the
-- gold-based figures, and human labels of the same (question, chunk) pairs calibrate the judge.

-- One judging run: a retriever's top `k` over a dataset's questions, under one judge. `config_key`
-- names the judge (the model file's sha256, the prompt, the passage cut), not the retriever or k:
-- the verdicts of one key over one dataset pool into one set of judged qrels.
CREATE TABLE relevance_runs (
  id INTEGER PRIMARY KEY,
  dataset_id INTEGER NOT NULL REFERENCES datasets(id) ON DELETE CASCADE,
  retriever TEXT NOT NULL,
  k INTEGER NOT NULL CHECK (k >= 1),
  model TEXT NOT NULL,            -- the judge GGUF as named (default: SmolLM2-135M)
  model_id TEXT NOT NULL,         -- its sha256
  config_key TEXT NOT NULL,       -- sha256 prefix of the judge's canonical config JSON
  config TEXT NOT NULL,           -- model, model_id, prompt (its sha256), max_chars
  created_at TEXT NOT NULL,
  UNIQUE (dataset_id, retriever, k, config_key)
);

-- One verdict per (question, retrieved chunk): a job of the run, committed on its own.
-- `relevant` 1 = the judge said Yes; `score` its probability-like score of relevant (1.0 / 0.0 for
-- a one-pass choice); `gen_key` the cached model call that gave it.
CREATE TABLE relevance_verdicts (
  run_id INTEGER NOT NULL REFERENCES relevance_runs(id) ON DELETE CASCADE,
  sid INTEGER NOT NULL,
  uid INTEGER NOT NULL,
  status TEXT NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'done', 'error')),
  relevant INTEGER CHECK (relevant IN (0, 1)),
  score REAL,
  gen_key TEXT,
  error TEXT,
  finished_at TEXT,
  PRIMARY KEY (run_id, sid, uid)
) WITHOUT ROWID;
CREATE INDEX relevance_verdicts_status ON relevance_verdicts(run_id, status);

-- A human label of one (question, chunk) pair of a dataset, whichever retriever brought it up:
-- `label` 1 = the chunk is relevant to answering the question. As in migration 0013: one row per
-- item and annotator, `via` how the item came to the annotator, the only ones an estimate may use
-- being `uniform`.
CREATE TABLE relevance_labels (
  dataset_id INTEGER NOT NULL REFERENCES datasets(id) ON DELETE CASCADE,
  sid INTEGER NOT NULL,
  uid INTEGER NOT NULL,
  annotator TEXT NOT NULL,
  label INTEGER NOT NULL CHECK (label IN (0, 1)),
  via TEXT NOT NULL CHECK (via IN ('uniform', 'disagreement', 'browse', 'import')),
  labelled_at TEXT NOT NULL,
  PRIMARY KEY (dataset_id, sid, uid, annotator),
  FOREIGN KEY (dataset_id, sid) REFERENCES samples(dataset_id, sid) ON DELETE CASCADE,
  FOREIGN KEY (dataset_id, uid) REFERENCES units(dataset_id, uid) ON DELETE CASCADE
) WITHOUT ROWID;
