-- A sequential run (`run --stop-when best|precision`) answers its samples in one seeded random order,
-- stored with the run when it is planned, so that `resume` (after Ctrl-C or kill -9) continues the same
-- order and every reader replays the same rounds. pos is 0..N-1; each of the run's samples once.
CREATE TABLE sequential_order (
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  pos INTEGER NOT NULL,
  sid INTEGER NOT NULL,
  PRIMARY KEY (run_id, pos)
);
