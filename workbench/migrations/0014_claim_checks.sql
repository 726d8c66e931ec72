-- Long-form checking (docs/design.md §6): three-way verdicts, reference claims and the checks
-- of the three relations besides response claim × unit (RAGChecker's names in brackets).

-- Response claim × unit [retrieved2response]: the verdicts keep their three-way label (E, N, C).
-- Rows written before this migration have none: read as E when supported, else N.
ALTER TABLE claim_verdicts ADD COLUMN label TEXT;

-- The reference (ground-truth) answer's claims, per sample: a short gold answer (KG QA) gives one
-- claim per answer with its aliases (source 'item'); a long one is decomposed like a response.
CREATE TABLE ref_claims (
  claim_run_id INTEGER NOT NULL REFERENCES claim_runs(id) ON DELETE CASCADE,
  sid INTEGER NOT NULL,
  idx INTEGER NOT NULL,
  text TEXT NOT NULL,
  source TEXT NOT NULL,           -- rule | llm | item | import
  PRIMARY KEY (claim_run_id, sid, idx)
);

-- Per answer (cell, sid): response claim × reference answer [answer2response], reference claim ×
-- response [response2answer], reference claim × unit [retrieved2answer]. One row per checker and
-- per the vote over them; a short gold answer's checker is 'containment', an imported file's 'ragchecker'.
CREATE TABLE claim_checks (
  claim_run_id INTEGER NOT NULL REFERENCES claim_runs(id) ON DELETE CASCADE,
  cell_id TEXT NOT NULL,
  sid INTEGER NOT NULL,
  relation TEXT NOT NULL,         -- answer2response | response2answer | retrieved2answer
  idx INTEGER NOT NULL,           -- answer2response: a response claim; else a reference claim
  uid INTEGER NOT NULL,           -- retrieved2answer: the unit; else -1
  checker TEXT NOT NULL,
  label TEXT NOT NULL,            -- E | N | C
  PRIMARY KEY (claim_run_id, cell_id, sid, relation, idx, uid, checker)
) WITHOUT ROWID;
