-- One writer at a time per run, claim run, SearChain run or dedup run: the holder of a
-- resource's lease is the only process executing it. A lease names its process (pid, host and
-- the pid's start time, so that a reused pid is not taken for the dead holder) and is deleted
-- by its holder's token when the pass ends; a holder killed with -9 leaves its row behind, and
-- the next writer on the same host takes it over.
CREATE TABLE leases (
  resource TEXT PRIMARY KEY,      -- run:NAME, claims:CLAIM_RUN_ID, searchain:NAME, dedup:NAME
  pid INTEGER NOT NULL,
  host TEXT NOT NULL,
  token TEXT NOT NULL,            -- random per acquisition: only the holder releases it
  pid_started INTEGER,            -- /proc/PID/stat starttime (clock ticks since boot); NULL off Linux
  started_at TEXT NOT NULL,
  command TEXT NOT NULL           -- e.g. workbench resume demo
);
