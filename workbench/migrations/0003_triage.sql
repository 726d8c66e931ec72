-- Triage: tags and free notes per sample (docs/design.md §9). Tags belong to the dataset's samples,
-- so they follow a sample across every run over it.
CREATE TABLE tags (
  dataset_id INTEGER NOT NULL,
  sid INTEGER NOT NULL,
  tag TEXT NOT NULL,
  created_at TEXT NOT NULL,
  PRIMARY KEY (dataset_id, sid, tag),
  FOREIGN KEY (dataset_id, sid) REFERENCES samples(dataset_id, sid) ON DELETE CASCADE
);
CREATE INDEX tags_tag ON tags(dataset_id, tag);

CREATE TABLE notes (
  dataset_id INTEGER NOT NULL,
  sid INTEGER NOT NULL,
  note TEXT NOT NULL,
  updated_at TEXT NOT NULL,
  PRIMARY KEY (dataset_id, sid),
  FOREIGN KEY (dataset_id, sid) REFERENCES samples(dataset_id, sid) ON DELETE CASCADE
);

-- The samples view filters events of one cell by quadrant and pages through them.
CREATE INDEX events_cell ON events(run_id, cell_id, sid);
