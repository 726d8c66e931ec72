-- The samples view reads one cell's rows by quadrant. A covering index answers those
-- filters and counts without visiting the table (a cell's rows are spread across pages,
-- one per sample, in a large run). The old events_cell duplicated the primary key.
DROP INDEX events_cell;
CREATE INDEX events_cell_cover ON events(run_id, cell_id, sid, h_set, h_vis, score, status, k_eff,
                                          evidence_tokens, truncated);
