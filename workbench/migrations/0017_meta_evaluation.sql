-- Meta-evaluation (issue 36): how far each checker agrees with people. A meta set is RAGChecker's
-- human preference data (or a user's own in its format): per instance a query, a reference answer
-- and two systems' responses, each pair compared by annotators on correctness, completeness and
-- overall from -2 (response 1 much better) to 2 (response 2 much better).
--
-- The queries and references are the samples of a dataset of the set's name (no units: nothing
-- was retrieved), and the responses are the imported answers of two runs over it, `NAME.model1` and
-- `NAME.model2`, one cell each: so `claims run` (and `meta run`, through it) decomposes and
-- verifies them with the same decomposers, verifiers, cache and resume as any answer.
CREATE TABLE meta_sets (
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL UNIQUE,
  dataset_id INTEGER NOT NULL REFERENCES datasets(id) ON DELETE CASCADE,
  run1_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,   -- the responses of model1
  run2_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,   -- the responses of model2
  source TEXT NOT NULL,             -- the human file as named
  content_sha256 TEXT NOT NULL,     -- of the human file and the baseline files, in order
  created_at TEXT NOT NULL
);

-- Which system wrote each response (RAGChecker's model_name: it varies from instance to instance).
CREATE TABLE meta_systems (
  set_id INTEGER NOT NULL REFERENCES meta_sets(id) ON DELETE CASCADE,
  sid INTEGER NOT NULL,
  side INTEGER NOT NULL CHECK (side IN (1, 2)),
  system TEXT,
  PRIMARY KEY (set_id, sid, side)
);

-- Every annotator's three labels. Annotators are told apart by their order within an instance
-- (0, 1, ...), as RAGChecker's meta_eval.py does; `line` is where the entry starts in the file.
CREATE TABLE meta_labels (
  set_id INTEGER NOT NULL REFERENCES meta_sets(id) ON DELETE CASCADE,
  sid INTEGER NOT NULL,
  annotator INTEGER NOT NULL CHECK (annotator >= 0),
  label TEXT NOT NULL CHECK (label IN ('correctness', 'completeness', 'overall')),
  value INTEGER NOT NULL CHECK (value BETWEEN -2 AND 2),
  line INTEGER,
  PRIMARY KEY (set_id, sid, annotator, label)
);

-- A scorer's score of each response: imported baselines (`scorer` = the evaluator, e.g. ragchecker,
-- `metric` its metric, e.g. correctness_label) and the workbench's whole-answer similarity
-- (`scorer` = similarity, `metric` = the embedding model's id). NULL: undefined for that response.
CREATE TABLE meta_scores (
  set_id INTEGER NOT NULL REFERENCES meta_sets(id) ON DELETE CASCADE,
  scorer TEXT NOT NULL,
  metric TEXT NOT NULL,
  sid INTEGER NOT NULL,
  side INTEGER NOT NULL CHECK (side IN (1, 2)),
  value REAL,
  PRIMARY KEY (set_id, scorer, metric, sid, side)
);
