-- Human labels of judged items (issue 18): who said what, when, and how the item was chosen.
-- One table per kind of item, so each keeps its own key and is deleted with what it labels.
-- A label is kept apart from anything it may inform: a dedup pair's label is not its merge
-- decision, an answer's label does not change the event's score. One row per item and
-- annotator: labelling an item again replaces the label and keeps how it was first chosen.
-- `via` says how the item came to the annotator: `uniform` (the uniform random queue: the
-- only labels a prediction-powered estimate may use), `disagreement` (the verifiers
-- disagreed), `browse` (picked by hand), `import` (a file that did not say).

-- A claim of an answer: `label` 1 = supported by at least one unit shown to the model.
-- `claim` is the text labelled: a re-decomposed answer whose claim `idx` now says
-- something else no longer matches the label.
CREATE TABLE claim_labels (
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  cell_id TEXT NOT NULL,
  sid INTEGER NOT NULL,
  idx INTEGER NOT NULL,
  annotator TEXT NOT NULL,
  label INTEGER NOT NULL CHECK (label IN (0, 1)),
  claim TEXT NOT NULL,
  via TEXT NOT NULL CHECK (via IN ('uniform', 'disagreement', 'browse', 'import')),
  labelled_at TEXT NOT NULL,
  PRIMARY KEY (run_id, cell_id, sid, idx, annotator)
) WITHOUT ROWID;

-- A candidate pair of a dedup run: `label` 1 = the two entities are the same object.
CREATE TABLE pair_labels (
  dedup_run_id INTEGER NOT NULL REFERENCES dedup_runs(id) ON DELETE CASCADE,
  a INTEGER NOT NULL,
  b INTEGER NOT NULL,
  annotator TEXT NOT NULL,
  label INTEGER NOT NULL CHECK (label IN (0, 1)),
  via TEXT NOT NULL CHECK (via IN ('uniform', 'disagreement', 'browse', 'import')),
  labelled_at TEXT NOT NULL,
  CHECK (a < b),
  PRIMARY KEY (dedup_run_id, a, b, annotator)
) WITHOUT ROWID;

-- An answer of a run (one sample in one cell): `label` 1 = correct, whatever the scorer said.
CREATE TABLE answer_labels (
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  cell_id TEXT NOT NULL,
  sid INTEGER NOT NULL,
  annotator TEXT NOT NULL,
  label INTEGER NOT NULL CHECK (label IN (0, 1)),
  via TEXT NOT NULL CHECK (via IN ('uniform', 'disagreement', 'browse', 'import')),
  labelled_at TEXT NOT NULL,
  PRIMARY KEY (run_id, cell_id, sid, annotator)
) WITHOUT ROWID;
