-- Run manifests (issue 17): what a run was made with, recorded when it is planned and
-- extended each time it is executed: the model file's sha256 and GGUF metadata, the
-- llama.cpp build, the workbench version and commit, the prompt template's hash, the
-- scorer, the tokenizer, content hashes of the samples and retrieval rows, and the host.
-- One JSON document per run; runs planned before this migration have none.
CREATE TABLE run_manifests (
  run_id INTEGER PRIMARY KEY REFERENCES runs(id) ON DELETE CASCADE,
  manifest TEXT NOT NULL CHECK (json_valid(manifest)),
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL
);
