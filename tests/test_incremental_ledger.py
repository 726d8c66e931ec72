"""The incremental ledger: a reader applies only the events changed since its watermark,
and what it shows equals a from-scratch computation with the same Poisson weights.

The oracle here is independent of the incremental machinery: per cell, the rows present now
(read with SQL), left out when tagged, fed to ``compute_ledger`` / ``oracle_terms`` with the
samples' sids as bootstrap keys.
"""

from __future__ import annotations

import sqlite3

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import copy_db, new_template
from workbench.metrics.ledger import TERMS, CellArrays, compute_ledger
from workbench.metrics.oracle import oracle_terms
from workbench.runs.aggregate import LedgerReader, verify
from workbench.runs.report import ledger_reader, run_ledger, saved_state_exists
from workbench.runs.sweep import SweepConfig, plan_sweep
from workbench.store import open_store
from workbench.store.queries import get_run
from workbench.triage import add_tag, remove_tag

R = 60  # resamples: enough to compare intervals, small enough for many examples
TAG = "annotation-error"
COLS = "cell_id, sid, h_set, h_vis, k_eff, evidence_tokens, truncated, evidence_sha256, visible, prediction, score"


@pytest.fixture(scope="module")
def stream_template(tmp_path_factory):
    """12 MetaQA questions × (K 1, 5 at B=64, linear) + oracle struct and 2 linear shuffles: 60 events."""
    with new_template(tmp_path_factory, "stream.db") as store:
        plan_sweep(store, SweepConfig(ks=(1, 5), budgets=(64,), formats=("linear",), oracle=True, shuffles=2,
                                      limit=12), name="s")
    return store.path


def rows_now(conn: sqlite3.Connection, run_id: int, excluded: set[int]) -> dict[str, dict[int, tuple]]:
    """Per cell, sid → (h_set, h_vis, k_eff, tokens, truncated, score) of the rows present and not excluded."""
    out: dict[str, dict[int, tuple]] = {}
    for cid, sid, *values in conn.execute(
            "SELECT cell_id, sid, h_set, h_vis, k_eff, evidence_tokens, truncated, score FROM events"
            " WHERE run_id = ? ORDER BY sid", (run_id,)):
        if sid not in excluded:
            out.setdefault(cid, {})[sid] = tuple(values)
    return out


def arrays(rows: dict[int, tuple], sids: list[int]) -> CellArrays:
    """A cell's rows aligned on ``sids`` (absent: zeros and no score)."""
    get = [rows.get(s, (0, 0, 0, 0, 0, None)) for s in sids]
    col = lambda j: np.array([r[j] for r in get], dtype=np.float64)  # noqa: E731
    score = np.array([np.nan if r[5] is None else r[5] for r in get], dtype=np.float64)
    return CellArrays(col(0), col(1), score, col(2), col(3), col(4))


def assert_estimate(got, want, what) -> None:
    assert (got.value is None) == (want.value is None), what
    if want.value is not None:
        assert got.value == pytest.approx(want.value, abs=1e-12), what
    for g, w in ((got.lo, want.lo), (got.hi, want.hi)):
        assert (g is None) == (w is None), what
        if w is not None:
            assert g == pytest.approx(w, abs=1e-9), what


def assert_from_scratch(report, conn, run_id: int, excluded: set[int]) -> None:
    """Every cell's terms, and the oracle controls, against a from-scratch computation."""
    now = rows_now(conn, run_id, excluded)
    for row in report.rows:
        cell = now.get(row["cell_id"], {})
        sids = sorted(cell)
        want = compute_ledger({"c": arrays(cell, sids)}, resamples=R, keys=np.array(sids, dtype=np.int64))["c"]
        for t in TERMS:
            assert_estimate(row[t], want[t], (row["cell_id"], t))
    for o in report.oracle:
        b = o["budget"]
        struct, linear = f"oracle-b{b}-struct", [f"oracle-b{b}-linear-m{m}" for m in range(2)]
        union = sorted(set().union(*(now.get(c, {}) for c in [struct, *linear])))
        real = {cid: arrays(now.get(cid, {}), union) for cid in (r["cell_id"] for r in report.rows)}
        want = oracle_terms(arrays(now.get(struct, {}), union).score,
                            np.vstack([arrays(now.get(c, {}), union).score for c in linear]), real,
                            resamples=R, keys=np.array(union, dtype=np.int64))
        for t in ("n", "Acc_struct", "Acc_linear", "L_struct"):
            assert_estimate(o[t], want[t], (b, t))
        for noise in o["L_noise"]:
            assert_estimate(noise["L_noise"], want["L_noise"][noise["cell_id"]], (noise["cell_id"], "L_noise"))
            assert noise["n"].value == want["n_noise"][noise["cell_id"]].value


CELLS = ["k1-b64-linear", "k5-b64-linear", "oracle-b64-struct", "oracle-b64-linear-m0", "oracle-b64-linear-m1"]
operation = st.one_of(
    st.tuples(st.just("score"), st.integers(0, 4), st.integers(0, 5), st.sampled_from([0.0, 0.5, 1.0, None])),
    st.tuples(st.just("delete"), st.integers(0, 4), st.integers(0, 5)),
    st.tuples(st.just("insert"), st.integers(0, 4), st.integers(0, 5)),
    st.tuples(st.just("tag"), st.integers(0, 5)),
    st.tuples(st.just("untag"), st.integers(0, 5)),
    st.tuples(st.just("read"), st.booleans()),
)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(operation, min_size=1, max_size=25))
def test_a_stream_of_changes_read_from_a_second_connection_equals_a_from_scratch_ledger(
        ops, stream_template, tmp_path_factory):
    path = copy_db(stream_template, tmp_path_factory.mktemp("stream") / "wb.db")
    writer, other = open_store(path), open_store(path)
    try:
        run = get_run(writer, "s")
        sids = [r[0] for r in writer.conn.execute("SELECT DISTINCT sid FROM events ORDER BY sid")]
        # A long-lived reader (as the TUI keeps), saving its state after every 3 changes.
        reader = LedgerReader(other, run, resamples=R, persist_every=3)
        graveyard: dict[tuple[str, int], tuple] = {}
        tagged: set[int] = set()
        for op in [*ops, ("read", True)]:
            kind = op[0]
            if kind == "score":
                writer.conn.execute("UPDATE events SET score = ? WHERE run_id = ? AND cell_id = ? AND sid = ?",
                                    (op[3], run.id, CELLS[op[1]], sids[op[2]]))
            elif kind == "delete":
                key = (CELLS[op[1]], sids[op[2]])
                row = writer.conn.execute(f"SELECT {COLS} FROM events WHERE run_id = ? AND cell_id = ? AND sid = ?",
                                          (run.id, *key)).fetchone()
                if row is not None:
                    graveyard[key] = row
                    writer.conn.execute("DELETE FROM events WHERE run_id = ? AND cell_id = ? AND sid = ?",
                                        (run.id, *key))
            elif kind == "insert":
                row = graveyard.pop((CELLS[op[1]], sids[op[2]]), None)
                if row is not None:
                    writer.conn.execute(f"INSERT INTO events (run_id, {COLS}) VALUES (?{', ?' * len(row)})",
                                        (run.id, *row))
            elif kind == "tag":
                add_tag(writer, run.dataset_id, sids[op[1]], TAG)
                tagged.add(sids[op[1]])
            elif kind == "untag":
                remove_tag(writer, run.dataset_id, sids[op[1]], TAG)
                tagged.discard(sids[op[1]])
            else:
                if op[1]:  # the long-lived reader catches up
                    report = run_ledger(other, run, resamples=R, exclude_tags=[TAG], reader=reader)
                else:  # a cold one-shot reader: the saved state, caught up from the log
                    report = run_ledger(other, run, resamples=R, exclude_tags=[TAG])
                assert_from_scratch(report, writer.conn, run.id, tagged)
        assert verify(writer, run).ok
    finally:
        writer.close()
        other.close()


def test_a_refresh_reads_only_the_changed_events(stream_template, tmp_path):
    store = open_store(copy_db(stream_template, tmp_path / "wb.db"))
    run = get_run(store, "s")
    reader = ledger_reader(store, run, resamples=R, persist_every=1000)
    reader.refresh()
    assert reader.stats.rebuilt and reader.stats.rows_read == 60 and saved_state_exists(store, run)
    reader.refresh()
    assert (reader.stats.changed, reader.stats.rows_read) == (0, 0)  # nothing changed: nothing read
    for sid in (1, 2, 3):
        store.conn.execute("UPDATE events SET score = 1 WHERE run_id = ? AND cell_id = 'k5-b64-linear' AND sid = ?",
                           (run.id, sid))
    reader.refresh()
    # 3 changed events: 3 log rows, each joined with its event's current row; a real linear cell's
    # paired noise loss also reads the two oracle shuffles' rows of those 3 samples (its partners).
    assert (reader.stats.changed, reader.stats.log_rows) == (3, 3)
    assert reader.stats.rows_read == 3 + 3 * 2
    store.conn.execute("UPDATE events SET score = 0 WHERE run_id = ? AND cell_id = 'oracle-b64-struct' AND sid = 4",
                       (run.id,))
    reader.refresh()
    assert reader.stats.rows_read == 1 + 2  # the struct row and its two oracle shuffles
    store.close()


def test_a_cold_read_loads_the_saved_state_and_catches_up_from_the_watermark(stream_template, tmp_path):
    store = open_store(copy_db(stream_template, tmp_path / "wb.db"))
    run = get_run(store, "s")
    first = run_ledger(store, run, resamples=R)
    store.conn.execute("UPDATE events SET score = 1 WHERE run_id = ? AND cell_id = 'k1-b64-linear'", (run.id,))
    cold = ledger_reader(store, run, resamples=R)
    report = run_ledger(store, run, resamples=R, reader=cold)
    assert cold.stats.loaded and not cold.stats.rebuilt
    assert cold.stats.changed == 12 and cold.stats.saved
    by_cell = {r["cell_id"]: r for r in report.rows}
    assert by_cell["k1-b64-linear"]["S_llm"].value == 1.0
    assert by_cell["k5-b64-linear"]["S_set"] == {r["cell_id"]: r for r in first.rows}["k5-b64-linear"]["S_set"]
    # The save pruned the log below the only state's watermark.
    assert store.count("event_log") == 0
    assert_from_scratch(report, store.conn, run.id, set())
    store.close()


def test_a_reader_left_behind_by_pruning_reloads_the_saved_state(stream_template, tmp_path):
    path = copy_db(stream_template, tmp_path / "wb.db")
    a, b = open_store(path), open_store(path)
    run = get_run(a, "s")
    slow = ledger_reader(a, run, resamples=R, persist_every=1000)
    slow.refresh()
    a.conn.execute("UPDATE events SET score = 0.5 WHERE run_id = ? AND sid < 6", (run.id,))
    run_ledger(b, run, resamples=R)  # another reader saves and prunes the changes `slow` has not seen
    report = run_ledger(a, run, resamples=R, reader=slow)
    assert slow.stats.loaded  # its delta was gone: it took the newer saved state
    assert_from_scratch(report, a.conn, run.id, set())
    a.close()
    b.close()


def test_a_re_scored_ledger_keeps_its_own_state(stream_template, tmp_path):
    store = open_store(copy_db(stream_template, tmp_path / "wb.db"))
    run = get_run(store, "s")
    first = store.conn.execute("SELECT min(sid) FROM events WHERE run_id = ?", (run.id,)).fetchone()[0]
    # Every answer names the first gold answer among other words: wrong by exact match, right by cover.
    store.conn.execute("UPDATE events SET score = 0, prediction = (SELECT json_extract(s.answers, '$[0]') || ' and more'"
                       " FROM samples s WHERE s.dataset_id = ? AND s.sid = events.sid) WHERE run_id = ?",
                       (run.dataset_id, run.id))
    acc = {r["cell_id"]: r for r in run_ledger(store, run, resamples=R).rows}
    covers = {r["cell_id"]: r for r in run_ledger(store, run, resamples=R, score="cover").rows}
    assert store.count("ledger_states") == 2  # one per scorer
    assert all(r["S_llm"].value == 0 for r in acc.values())  # the stored exact-match scores
    assert all(covers[c]["S_llm"].value == 1 for c in covers)  # re-scored from the stored predictions
    store.conn.execute("UPDATE events SET prediction = NULL, score = NULL WHERE run_id = ? AND sid = ?",
                       (run.id, first))
    reader = ledger_reader(store, run, resamples=R, score="cover")
    again = {r["cell_id"]: r for r in run_ledger(store, run, resamples=R, score="cover", reader=reader).rows}
    assert reader.stats.loaded and reader.stats.changed == 5  # that sample in each of the 5 cells
    assert all(again[c]["n"].value == covers[c]["n"].value - 1 for c in again)  # one scored sample fewer
    assert verify(store, run, score="cover").ok and verify(store, run).ok
    store.close()


def test_deleting_a_run_logs_nothing_and_drops_its_state(stream_template, tmp_path):
    from workbench.store.queries import delete_run

    store = open_store(copy_db(stream_template, tmp_path / "wb.db"))
    run_ledger(store, get_run(store, "s"), resamples=R)
    delete_run(store, "s")
    assert store.count("event_log") == 0 and store.count("ledger_states") == 0 and store.count("ledger_sums") == 0
    store.close()


def test_compare_and_the_ledger_weigh_each_sample_alike(swept_db):
    from workbench.compare.report import compare_runs
    from workbench.runs.report import cell_difference

    store = open_store(swept_db)
    run = get_run(store, "sweep")
    # Run "sweep" against itself with K=5 mapped to K=1: compare's B − A is the ledger's paired difference.
    c = compare_runs(store, "sweep", "sweep", cells=["k5-b64-score"], cell_map={"k5-b64-score": "k1-b64-score"},
                     terms=["S_set", "S_vis"], resamples=400)
    for term in ("S_set", "S_vis"):
        ledger = cell_difference(store, run, "k1-b64-score", "k5-b64-score", term, resamples=400)
        got = c.cells[0].terms[term].delta
        assert got.value == pytest.approx(ledger.value, abs=1e-12)
        assert (got.lo, got.hi) == (pytest.approx(ledger.lo, abs=1e-6), pytest.approx(ledger.hi, abs=1e-6))
    store.close()


def test_ledger_verify_reports_no_difference_and_names_a_drifted_cell(stream_template, tmp_path, capsys):
    from workbench.cli import main

    path = copy_db(stream_template, tmp_path / "wb.db")
    assert main(["--db", str(path), "ledger", "s", "--verify"]) == 0  # builds the state first, then checks it
    out = capsys.readouterr().out
    assert "equals a from-scratch computation: no difference" in out
    # Drift planted in the saved state of one cell (as a bug in the deltas would leave it).
    store = open_store(path)
    store.conn.execute("UPDATE ledger_sums SET sums = ? WHERE grp = 'cell:k1-b64-linear'",
                       (np.full(16, 7.0).tobytes(),))
    store.close()
    assert main(["--db", str(path), "ledger", "s", "--verify"]) == 1
    out = capsys.readouterr().out
    assert "differs from a from-scratch computation" in out and "cell:k1-b64-linear: point sums differ" in out


def test_a_build_over_fully_and_partly_scored_cells_equals_a_from_scratch_ledger(stream_template, tmp_path):
    # A build computes a fully scored cell's columns once for both populations: check it on both kinds.
    store = open_store(copy_db(stream_template, tmp_path / "wb.db"))
    run = get_run(store, "s")
    store.conn.execute("UPDATE events SET score = (sid % 3) / 2.0 WHERE run_id = ? AND cell_id != 'k5-b64-linear'",
                       (run.id,))
    store.conn.execute("UPDATE events SET score = 1 WHERE run_id = ? AND cell_id = 'k5-b64-linear' AND sid % 2 = 0",
                       (run.id,))
    reader = ledger_reader(store, run, resamples=R)
    report = run_ledger(store, run, resamples=R, reader=reader)
    assert reader.stats.rebuilt
    assert_from_scratch(report, store.conn, run.id, set())
    # Unscored again, a cell falls back on its all-rows population, built from the copied columns.
    store.conn.execute("UPDATE events SET score = NULL WHERE run_id = ? AND cell_id = 'k1-b64-linear'", (run.id,))
    report = run_ledger(store, run, resamples=R, reader=reader)
    assert not reader.stats.rebuilt and reader.stats.changed == 12
    assert_from_scratch(report, store.conn, run.id, set())
    store.close()
