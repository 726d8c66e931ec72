-- Vectors of texts by an embedding model (docs/design.md §7): dense retrieval, hybrid retrieval and
-- the embedding verifier read them here, so a re-run embeds nothing and a changed corpus embeds
-- only its changed units. Keyed by content: the same text in two datasets is embedded once.
CREATE TABLE embeddings (
  model TEXT NOT NULL,            -- sha256 of the embedding GGUF
  text_sha TEXT NOT NULL,         -- sha256 of the text as embedded (UTF-8)
  dim INTEGER NOT NULL,
  vector BLOB NOT NULL,           -- float32, little-endian, unit length
  tokens INTEGER NOT NULL,        -- tokens embedded ([CLS] and [SEP] included), after truncation
  truncated INTEGER NOT NULL,     -- 1 when the text was longer than the model's window
  PRIMARY KEY (model, text_sha)
) WITHOUT ROWID;
