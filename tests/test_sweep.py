"""Planning a sweep: every (sample, cell) gets H_set, H_vis, K_eff, tokens and the truncation flag."""

import json

import pytest

from workbench.data.exports import event_records
from workbench.evidence import get_tokenizer, render_line
from workbench.evidence.units import Unit
from workbench.runs.report import run_ledger
from workbench.runs.sweep import SweepConfig, plan_sweep
from workbench.store import open_store
from workbench.store.queries import get_run

T1 = Unit(1, "triple", "Kismet", "directed_by", "William Dieterle")
T3 = Unit(3, "triple", "Kismet", "release_year", "1944")


def _events(store, run="s"):
    return {(e["cell_id"], e["sample_id"]): e for e in event_records(store, get_run(store, run))}


def test_h_set_follows_the_top_k_and_a_wide_window_shows_everything(tiny_store):
    plan_sweep(tiny_store, SweepConfig(ks=(1, 2, 3), budgets=(1000,), formats=("score",)), name="s")
    ev = _events(tiny_store)
    # q1's gold triple is at rank 2, q2's two-triple path completes at rank 3, q3's never shows.
    assert [ev[(f"k{k}-b1000-score", "q1")]["h_set"] for k in (1, 2, 3)] == [0, 1, 1]
    assert [ev[(f"k{k}-b1000-score", "q2")]["h_set"] for k in (1, 2, 3)] == [0, 0, 1]
    assert [ev[(f"k{k}-b1000-score", "q3")]["h_set"] for k in (1, 2, 3)] == [0, 0, 0]
    for e in ev.values():
        assert e["h_vis"] == e["h_set"] and e["truncated"] == 0 and e["score"] is None
    # K_eff counts what the retriever returned, capped by K: q3 only has one result.
    assert [ev[(f"k{k}-b1000-score", "q3")]["k_eff"] for k in (1, 2, 3)] == [1, 1, 1]


def test_a_budget_that_cuts_the_gold_line_makes_a_retrieved_hit_invisible(tiny_store):
    tok = get_tokenizer()
    first_line = len(tok.encode(render_line(T3) + "\n"))
    both = len(tok.encode(render_line(T3) + "\n" + render_line(T1) + "\n"))
    plan_sweep(tiny_store, SweepConfig(ks=(2,), budgets=(first_line, both - 1, both), formats=("score",)), name="s")
    ev = _events(tiny_store)
    exact, one_short, full = (ev[(f"k2-b{b}-score", "q1")] for b in (first_line, both - 1, both))
    assert (exact["h_set"], exact["h_vis"], exact["k_eff"], exact["truncated"]) == (1, 0, 1, 1)
    assert exact["evidence_tokens"] == first_line
    # One token short of the second line: that line is cut part-way, so it is not visible.
    assert (one_short["h_vis"], one_short["k_eff"], one_short["evidence_tokens"]) == (0, 1, both - 1)
    assert (full["h_vis"], full["k_eff"], full["truncated"], full["evidence_tokens"]) == (1, 2, 0, both)


def test_rerunning_the_same_sweep_is_a_no_op_and_a_changed_config_is_refused(tiny_store):
    cfg = SweepConfig(ks=(1, 2), budgets=(64,), formats=("linear",))
    first = plan_sweep(tiny_store, cfg, name="s")
    again = plan_sweep(tiny_store, cfg, name="s")
    assert first.created and not again.created and again.events == first.events == 2 * 3
    assert tiny_store.count("events") == 6
    with pytest.raises(ValueError, match="exists with a different config"):
        plan_sweep(tiny_store, SweepConfig(ks=(1, 2, 5), budgets=(64,), formats=("linear",)), name="s")
    assert tiny_store.count("events") == 6
    # Without --name the run is named by its config, so the same command finds the same run.
    a = plan_sweep(tiny_store, cfg)
    b = plan_sweep(tiny_store, cfg)
    assert a.run == b.run and a.created and not b.created


def test_bad_grids_are_rejected_with_the_option_named(tiny_store):
    for cfg, option in ((SweepConfig(ks=(), budgets=(64,), formats=("score",)), "--k"),
                        (SweepConfig(ks=(1,), budgets=(0,), formats=("score",)), "--budget"),
                        (SweepConfig(ks=(1,), budgets=(64,), formats=("bogus",)), "--format"),
                        (SweepConfig(ks=(1,), budgets=(64,), formats=("score",), retriever="dense"), "--retriever")):
        with pytest.raises(ValueError, match=option):
            plan_sweep(tiny_store, cfg)
    assert tiny_store.count("runs") == 0


def test_oracle_cells_hold_only_the_shortest_gold_path(tiny_store):
    plan_sweep(tiny_store, SweepConfig(ks=(1,), budgets=(1000,), formats=("linear",), oracle=True, shuffles=2),
               name="s")
    ev = _events(tiny_store)
    assert {c for c, _ in ev if c.startswith("oracle")} == {
        "oracle-b1000-struct", "oracle-b1000-linear-m0", "oracle-b1000-linear-m1"}
    q2 = ev[("oracle-b1000-struct", "q2")]
    assert (q2["h_set"], q2["h_vis"], q2["k_eff"]) == (1, 1, 2)


def test_identical_windows_are_stored_once(tiny_store):
    plan_sweep(tiny_store, SweepConfig(ks=(1, 2, 3), budgets=(500, 1000), formats=("score",)), name="s")
    # 3 samples × 3 K × 2 B = 18 events, but B never cuts here and q3 has one result:
    distinct = {(s, min(k, n)) for s, n in (("q1", 2), ("q2", 3), ("q3", 1)) for k in (1, 2, 3)}
    assert tiny_store.count("events") == 18
    assert tiny_store.count("evidence") == len(distinct)


def test_sample_data_sweep_is_sensible(metaqa_db):
    """S_set rises with K; S_vis ≤ S_set in every cell and for every event."""
    store = open_store(metaqa_db)
    report = run_ledger(store, get_run(store, "sweep"), resamples=200)
    by_cell = {(r["k"], r["budget"], r["format"]): r for r in report.rows}
    for (k, b, f), row in by_cell.items():
        assert row["S_vis"].value <= row["S_set"].value
        assert row["L_iface"].value >= 0
        assert row["S_llm"].value is None  # nothing generated yet: undefined, not 0
    s_set = [by_cell[(k, 256, "score")]["S_set"].value for k in (1, 2, 5, 10, 20)]
    assert s_set == sorted(s_set) and s_set[-1] > s_set[0]
    bad = store.conn.execute("SELECT count(*) FROM events WHERE h_vis > h_set").fetchone()[0]
    assert bad == 0
    # Bigger budgets never show fewer units of the same ranked list.
    keff = [by_cell[(20, b, "score")]["K_eff"].value for b in (64, 128, 256)]
    assert keff == sorted(keff)
    visible = json.loads(store.conn.execute("SELECT visible FROM events LIMIT 1").fetchone()[0])
    assert all(isinstance(u, int) for u in visible)
