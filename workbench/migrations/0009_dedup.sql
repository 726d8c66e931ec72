-- Entity deduplication for KG construction (docs/design.md §8): a KG with provenance, gold clusters,
-- dedup runs with their candidate pairs, judge verdicts (with the contexts shown) and decisions.
CREATE TABLE kgs (
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL UNIQUE,
  source TEXT,
  content_sha256 TEXT NOT NULL,
  created_at TEXT NOT NULL
);
CREATE TABLE kg_entities (
  kg_id INTEGER NOT NULL REFERENCES kgs(id) ON DELETE CASCADE,
  eid INTEGER NOT NULL,           -- 0.. in order of first appearance in kb.jsonl
  name TEXT NOT NULL,             -- the surface form exactly as in kb.jsonl (NFC); entities are identified by it
  degree INTEGER NOT NULL,
  PRIMARY KEY (kg_id, eid)
);
CREATE UNIQUE INDEX kg_entities_name ON kg_entities(kg_id, name);
CREATE TABLE kg_triples (
  kg_id INTEGER NOT NULL REFERENCES kgs(id) ON DELETE CASCADE,
  tid INTEGER NOT NULL,           -- kb.jsonl line order
  head INTEGER NOT NULL,
  relation TEXT NOT NULL,
  tail INTEGER NOT NULL,
  chunks TEXT NOT NULL DEFAULT '[]',  -- JSON list of source chunk ids, in the line's order
  PRIMARY KEY (kg_id, tid)
);
CREATE INDEX kg_triples_head ON kg_triples(kg_id, head);
CREATE INDEX kg_triples_tail ON kg_triples(kg_id, tail);
CREATE TABLE kg_chunks (
  kg_id INTEGER NOT NULL REFERENCES kgs(id) ON DELETE CASCADE,
  chunk_id TEXT NOT NULL,
  text TEXT NOT NULL,
  PRIMARY KEY (kg_id, chunk_id)
);
CREATE TABLE kg_gold (
  kg_id INTEGER NOT NULL REFERENCES kgs(id) ON DELETE CASCADE,
  eid INTEGER NOT NULL,
  cluster TEXT NOT NULL,
  PRIMARY KEY (kg_id, eid)
);

CREATE TABLE dedup_runs (
  id INTEGER PRIMARY KEY,
  kg_id INTEGER NOT NULL REFERENCES kgs(id) ON DELETE CASCADE,
  name TEXT NOT NULL UNIQUE,
  config TEXT NOT NULL,
  candidate_stats TEXT NOT NULL,  -- JSON: pairs, reduction ratio, pairs-completeness, by reason
  created_at TEXT NOT NULL
);
CREATE TABLE dedup_pairs (
  run_id INTEGER NOT NULL REFERENCES dedup_runs(id) ON DELETE CASCADE,
  a INTEGER NOT NULL,
  b INTEGER NOT NULL,             -- a < b, entity ids
  reasons TEXT NOT NULL,          -- exact, fuzzy, initials, neighbours, embedding
  score REAL NOT NULL,
  PRIMARY KEY (run_id, a, b)
) WITHOUT ROWID;
-- One judgement per (pair, mode); the contexts are stored exactly as shown (provenance).
CREATE TABLE dedup_verdicts (
  run_id INTEGER NOT NULL REFERENCES dedup_runs(id) ON DELETE CASCADE,
  a INTEGER NOT NULL,
  b INTEGER NOT NULL,
  mode TEXT NOT NULL,             -- graph | graph+text | embedding
  status TEXT NOT NULL DEFAULT 'pending',
  error TEXT,
  is_coreferent INTEGER,
  confidence REAL,
  rationale TEXT,
  context_a TEXT,
  context_b TEXT,
  gen_key TEXT,
  finished_at TEXT,
  PRIMARY KEY (run_id, a, b, mode)
) WITHOUT ROWID;
-- A reviewer's decision overrides the threshold: accepted merges apply, rejected (or reverted) ones do not.
CREATE TABLE dedup_decisions (
  run_id INTEGER NOT NULL REFERENCES dedup_runs(id) ON DELETE CASCADE,
  a INTEGER NOT NULL,
  b INTEGER NOT NULL,
  mode TEXT NOT NULL,
  decision TEXT NOT NULL CHECK (decision IN ('accepted', 'rejected')),
  decided_at TEXT NOT NULL,
  PRIMARY KEY (run_id, a, b, mode)
) WITHOUT ROWID;
