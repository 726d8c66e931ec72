-- Jobs: every (sample, cell) event is a generation job with a status (docs/design.md §4).
ALTER TABLE events ADD COLUMN status TEXT NOT NULL DEFAULT 'pending';  -- pending | done | error
ALTER TABLE events ADD COLUMN error TEXT;
ALTER TABLE events ADD COLUMN source TEXT;             -- model | cache | import
ALTER TABLE events ADD COLUMN gen_key TEXT;            -- generations.key of the output used
ALTER TABLE events ADD COLUMN prompt_tokens INTEGER;   -- the rendered prompt's length in model tokens
ALTER TABLE events ADD COLUMN eval_tokens INTEGER;     -- prompt tokens the model really evaluated (0 on a cache hit)
ALTER TABLE events ADD COLUMN completion_tokens INTEGER;
ALTER TABLE events ADD COLUMN citations TEXT;          -- JSON list of cited unit labels (grounded mode)
ALTER TABLE events ADD COLUMN finished_at TEXT;
UPDATE events SET status = 'done', source = 'import' WHERE score IS NOT NULL;
CREATE INDEX events_status ON events(run_id, status);

-- Content-addressed generation cache: key = sha256 over model sha256, chat template,
-- rendered prompt, sampling parameters, seed, max_tokens and the output schema.
CREATE TABLE generations (
  key TEXT PRIMARY KEY,
  model_id TEXT NOT NULL,
  output TEXT NOT NULL,
  prompt_tokens INTEGER NOT NULL,
  completion_tokens INTEGER NOT NULL,
  seconds REAL NOT NULL,
  finish_reason TEXT,
  created_at TEXT NOT NULL
);

-- sha256 of model files, remembered by (path, size, mtime) so a 100 MB GGUF is hashed once.
CREATE TABLE model_files (
  path TEXT PRIMARY KEY,
  size INTEGER NOT NULL,
  mtime_ns INTEGER NOT NULL,
  sha256 TEXT NOT NULL
);
