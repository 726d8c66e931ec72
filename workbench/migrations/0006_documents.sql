-- Documents of a Markdown corpus (docs/design.md §5). Their chunks are the dataset's units
-- (kind chunk): units.doc_id is the chunk's parent_id, the document's relative path.
CREATE TABLE documents (
  dataset_id INTEGER NOT NULL REFERENCES datasets(id) ON DELETE CASCADE,
  doc_id TEXT NOT NULL,            -- relative path, '/'-separated
  title TEXT NOT NULL,             -- from the file name (红烧肉.md → 红烧肉)
  heading TEXT,                    -- the first Markdown heading, if any
  category TEXT NOT NULL,          -- from the folder
  chars INTEGER NOT NULL,
  sha256 TEXT NOT NULL,
  PRIMARY KEY (dataset_id, doc_id)
);
CREATE INDEX units_doc ON units(dataset_id, doc_id);
