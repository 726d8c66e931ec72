"""The analysis API (workbench.analysis) and the Parquet exports.

Each frame must equal the CLI's export of the same thing. Its dtypes are fixed, whatever
the data. A Parquet file reads back the same through pandas and DuckDB. A path is read
read-only, so nothing is written and a writer in another connection goes on.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time

import duckdb
import numpy as np
import pandas as pd
import pandas.testing as pdt
import pyarrow.parquet as pq
import pytest

from conftest import copy_db, write_jsonl
from workbench import analysis
from workbench.claims.report import claims_by_cell
from workbench.claims.runner import ClaimsConfig, run_claims
from workbench.cli import main
from workbench.data.exports import flatten
from workbench.data.predictions import import_predictions
from workbench.errors import EnvironmentFault
from workbench.runs.sweep import SweepConfig, plan_sweep
from workbench.store import open_store
from workbench.store.manifests import get_manifest
from workbench.store.queries import get_dataset, get_run, load_samples, sample_sid
from workbench.triage import add_tag, set_note

CLAIM_CELL = "k5-b64-score"
UNSCORED_CELL = "k20-b64-score"   # planned, never answered: its reasoning terms are undefined

# The dtype maps, spelled out: a change to any of them is a change of the public contract.
EVENT_TYPES = {"sample_id": "str", "cell_id": "str", "kind": "str", "k": "Int64", "budget": "int64", "format": "str",
               "shuffle": "Int64", "h_set": "int64", "h_vis": "int64", "k_eff": "int64", "evidence_tokens": "int64",
               "truncated": "int64", "prediction": "str", "score": "float64"}
TERM_NAMES = ["n", "S_set", "S_vis", "L_iface", "S_llm", "Acc_hit", "Acc_miss", "D_rate", "D_mass", "L_leak", "K_eff",
              "evidence_tokens", "truncated"]
CLAIM_METRIC_NAMES = ["faithfulness", "hallucination", "self_knowledge", "noise_sensitivity_relevant",
                      "context_utilization"]
LEDGER_TYPES = {"cell_id": "str", "k": "int64", "budget": "int64", "format": "str",
                **{c: t for name in TERM_NAMES for c, t in ((name, "Int64" if name == "n" else "float64"),
                                                            (f"{name}_lo", "float64"), (f"{name}_hi", "float64"))},
                "claims_n": "Int64",
                **{c: "float64" for name in CLAIM_METRIC_NAMES for c in (name, f"{name}_lo", f"{name}_hi")}}
SAMPLE_TYPES = {"cell_id": "str", "sample_id": "str", "question": "str", "h_set": "int64", "h_vis": "int64",
                "k_eff": "int64", "truncated": "int64", "score": "float64", "prediction": "str", "tags": "str"}
CLAIM_TYPES = {"claim_run": "int64", "cell_id": "str", "sample_id": "str", "support_ratio": "float64",
               **{m: "float64" for m in ("faithfulness", "hallucination", "self_knowledge", "context_utilization",
                                         "noise_sensitivity_relevant", "noise_sensitivity_irrelevant", "claim_recall",
                                         "context_precision", "precision", "recall", "f1")},
               # The same answer's figures under RAGChecker's convention, by RAGChecker's names.
               **{f"ragchecker_{m}": "float64" for m in (
                   "precision", "recall", "f1", "claim_recall", "context_precision", "context_utilization",
                   "noise_sensitivity_in_relevant", "noise_sensitivity_in_irrelevant", "hallucination",
                   "self_knowledge", "faithfulness")}}
COMPARE_TYPES = {"cell_a": "str", "cell_b": "str", "kind": "str", "term": "str", "n": "int64", "a": "float64",
                 "b": "float64", "delta": "float64", "delta_lo": "float64", "delta_hi": "float64", "p": "float64",
                 "test": "str", "p_holm": "float64", "significant": "bool"}
DATASET_TYPES = {"name": "str", "unit_kind": "str", "created_at": "datetime64[us, UTC]", "units": "int64",
                 "units_outside_kb": "int64", "samples": "int64", "retrievers": "str", "hops": "str"}
RUN_TYPES = {"name": "str", "dataset": "str", "retriever": "str", "model": "str", "created_at": "datetime64[us, UTC]",
             "cells": "int64", "jobs": "int64", "done": "int64", "pending": "int64", "errors": "int64",
             "skipped": "int64"}
TAG_TYPES = {"dataset": "str", "sample_id": "str", "tag": "str", "note": "str", "question": "str"}


def dtypes(frame: pd.DataFrame) -> dict[str, str]:
    return {name: str(dtype) for name, dtype in frame.dtypes.items()}


def plain(frame: pd.DataFrame) -> list[dict]:
    """A frame's rows as plain Python records, NaN and <NA> as None (what the JSON exports hold)."""
    def value(v):
        if v is None or (not isinstance(v, str) and pd.isna(v)):
            return None
        return v.item() if isinstance(v, np.generic) else v
    return [{k: value(v) for k, v in row.items()} for row in frame.to_dict("records")]


def cli(db, *args) -> None:
    assert main(["--db", str(db), *map(str, args)]) == 0


def jsonl(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _predict(store, run_name: str, cells: dict[str, int], path) -> None:
    """Score ``cells`` of a run through the predictions import: every ``cells[c]``-th sample answers wrong."""
    run = get_run(store, run_name)
    rows = [{"sample_id": s.id, "cell_id": cell, "prediction": "no idea" if s.sid % every == 0 else s.answers[0]}
            for cell, every in cells.items() for s in load_samples(store, run.dataset_id)]
    import_predictions(store, run, write_jsonl(path, rows))


@pytest.fixture(scope="module")
def results_template(tmp_path_factory, swept_template):
    """The model-free MetaQA sweep, answered through the predictions import.

    k1 and k5 are scored, and k20 and the oracle cells are left unscored. A second run,
    ``other``, answers differently. A rule + lexical claim run covers 40 answers of k5. Two
    samples are tagged, and one of them has a note.
    """
    directory = tmp_path_factory.mktemp("analysis")
    db = copy_db(swept_template, directory / "wb.db")
    store = open_store(db)
    _predict(store, "sweep", {"k1-b64-score": 4, CLAIM_CELL: 3}, directory / "sweep.jsonl")
    plan_sweep(store, SweepConfig(ks=(1, 5, 20), budgets=(64,), formats=("score",)), name="other")
    _predict(store, "other", {"k1-b64-score": 2, CLAIM_CELL: 2, UNSCORED_CELL: 5}, directory / "other.jsonl")
    run = get_run(store, "sweep")
    assert run_claims(store, run, ClaimsConfig(decomposer="rule", verifiers=("lexical",)), cells=[CLAIM_CELL],
                      limit=40).done == 40
    ds = get_dataset(store, "metaqa")
    first, second = load_samples(store, ds.id)[:2]
    add_tag(store, ds.id, first.sid, "annotation-error")
    add_tag(store, ds.id, first.sid, "alias-miss")
    add_tag(store, ds.id, second.sid, "reasoning-fail")
    set_note(store, ds.id, second.sid, "reads the year as the answer")
    store.close()
    return db


@pytest.fixture
def results_db(tmp_path, results_template):
    return copy_db(results_template, tmp_path / "wb.db")


# -- each frame equals its CLI export ------------------------------------------------------------


def test_events_equal_the_events_table_and_the_export_in_every_format(results_db, tmp_path):
    frame = analysis.events(results_db, "sweep")
    con = sqlite3.connect(results_db)
    table = con.execute(
        "SELECT s.id, e.cell_id, c.kind, c.k, c.budget, c.format, c.shuffle, e.h_set, e.h_vis, e.k_eff,"
        " e.evidence_tokens, e.truncated, e.prediction, e.score FROM events e JOIN runs r ON r.id = e.run_id"
        " JOIN cells c ON c.run_id = e.run_id AND c.cell_id = e.cell_id"
        " JOIN samples s ON s.dataset_id = r.dataset_id AND s.sid = e.sid"
        " WHERE r.name = 'sweep' ORDER BY e.cell_id, e.sid").fetchall()
    con.close()
    assert plain(frame) == [dict(zip(EVENT_TYPES, row)) for row in table]
    assert len(frame) == 300 * 6 and frame["k"].isna().sum() == 300 * 3  # three oracle cells
    assert frame.loc[frame.cell_id == UNSCORED_CELL, "score"].isna().all()

    cli(results_db, "export", "events", "sweep", "--out", tmp_path / "e.jsonl")
    assert plain(frame) == jsonl(tmp_path / "e.jsonl")
    cli(results_db, "export", "events", "sweep", "--out", tmp_path / "e.parquet")
    pdt.assert_frame_equal(pd.read_parquet(tmp_path / "e.parquet"), frame, check_exact=True)
    cli(results_db, "export", "events", "sweep", "--out", tmp_path / "e.csv")
    csv = pd.read_csv(tmp_path / "e.csv")      # the CSV export is unchanged: one row per event, blank when undefined
    assert list(csv.columns) == list(EVENT_TYPES) and csv["sample_id"].tolist() == frame["sample_id"].tolist()
    assert np.array_equal(csv["score"].to_numpy(), frame["score"].to_numpy(), equal_nan=True)


def test_events_read_in_any_chunk_size_are_the_same_rows(results_db):
    whole = analysis.events(results_db, "sweep")
    for chunk_rows in (1, 7, 128, 10_000):
        pdt.assert_frame_equal(analysis.events(results_db, "sweep", chunk_rows=chunk_rows), whole, check_exact=True)
    pdt.assert_frame_equal(analysis.events(results_db, "other"), analysis.events(results_db, "other", chunk_rows=3),
                           check_exact=True)


# Scores and texts that the chunked reader must bring back bit for bit: fractions, scores
# too small for its scaled-integer path (read per row), and texts with quotes, escapes,
# control characters, NUL and non-ASCII.
ODD_SCORES = [1 / 3, 2 / 3, 0.1, 0.5 + 2 ** -53, 1 - 2 ** -53, 2 ** -8, 2 ** -9, 1e-5, 1e-300, 5e-324, 0.0, 1.0]
ODD_TEXTS = ['say "hi"', "back\\slash", "tab\tand\nnewline", "nul\x00inside", "\x1f,\x1e", "日本語 · émoji 🎉", "", "[1, 2]"]


def test_events_bring_back_every_score_and_text_exactly(results_db):
    con = sqlite3.connect(results_db)
    rowids = [r[0] for r in con.execute("SELECT e.rowid FROM events e JOIN runs r ON r.id = e.run_id"
                                        " WHERE r.name = 'sweep' ORDER BY e.rowid")]
    picked = rowids[5::97][:len(ODD_SCORES) + len(ODD_TEXTS)]
    with con:
        for rowid, score in zip(picked, ODD_SCORES):
            con.execute("UPDATE events SET score = ? WHERE rowid = ?", (score, rowid))
        for rowid, text in zip(picked[len(ODD_SCORES):], ODD_TEXTS):
            con.execute("UPDATE events SET prediction = ?, score = NULL WHERE rowid = ?", (text, rowid))
    expected = {(cell, sample): (prediction, score) for cell, sample, prediction, score in con.execute(
        "SELECT e.cell_id, s.id, e.prediction, e.score FROM events e JOIN runs r ON r.id = e.run_id"
        " JOIN samples s ON s.dataset_id = r.dataset_id AND s.sid = e.sid WHERE r.name = 'sweep'")}
    con.close()
    for chunk_rows in (1, 50, 100_000):
        frame = analysis.events(results_db, "sweep", chunk_rows=chunk_rows)
        got = {(r["cell_id"], r["sample_id"]): (r["prediction"], r["score"]) for r in plain(frame)}
        assert got == expected
    scores = set(analysis.events(results_db, "sweep")["score"].dropna())
    assert {float(s).hex() for s in ODD_SCORES} <= {s.hex() for s in scores}


def test_the_ledger_equals_its_export_and_undefined_terms_stay_undefined(results_db, tmp_path):
    frame = analysis.ledger(results_db, "sweep", resamples=300)
    cli(results_db, "export", "ledger", "sweep", "--resamples", 300, "--out", tmp_path / "l.jsonl")
    rows = [flatten(r) for r in jsonl(tmp_path / "l.jsonl") if r["kind"] == "retrieval"]
    assert plain(frame) == [{c: r.get(c) for c in LEDGER_TYPES} for r in rows]
    assert frame["cell_id"].tolist() == ["k1-b64-score", "k5-b64-score", "k20-b64-score"]
    unscored = frame.set_index("cell_id").loc[UNSCORED_CELL]
    for term in ("S_llm", "S_llm_lo", "Acc_hit", "Acc_miss", "D_rate", "faithfulness"):
        assert np.isnan(unscored[term]), term          # undefined, never 0
    assert unscored["S_vis"] >= 0 and unscored["n"] == 300
    claimed = frame.set_index("cell_id")["claims_n"]
    assert claimed.to_dict() == {"k1-b64-score": 0, CLAIM_CELL: 40, UNSCORED_CELL: 0}
    cli(results_db, "export", "ledger", "sweep", "--resamples", 300, "--out", tmp_path / "l.parquet")
    exported = pd.read_parquet(tmp_path / "l.parquet")
    pdt.assert_frame_equal(exported, analysis.ledger(results_db, "sweep", resamples=300, controls=True),
                           check_exact=True)
    retrieval = exported[exported["kind"] == "retrieval"].drop(columns="kind").reset_index(drop=True)
    pdt.assert_frame_equal(retrieval[list(frame.columns)], frame, check_exact=True, check_dtype=False)


def test_the_parquet_ledger_holds_the_oracle_controls_of_the_jsonl_one(results_db, tmp_path):
    """Once the Parquet ledger had the retrieval cells only: the controls were in CSV/JSONL alone."""
    cli(results_db, "export", "ledger", "sweep", "--resamples", 300, "--out", tmp_path / "l.jsonl")
    cli(results_db, "export", "ledger", "sweep", "--resamples", 300, "--out", tmp_path / "l.parquet")
    oracle = [r for r in jsonl(tmp_path / "l.jsonl") if r["kind"] == "oracle"]
    frame = pd.read_parquet(tmp_path / "l.parquet")
    rows = frame[frame["kind"] == "oracle"].set_index("cell_id")
    assert sorted(rows.index) == sorted(r["cell_id"] for r in oracle) and oracle
    for rec in oracle:
        for term in ("Acc_struct", "Acc_linear", "L_struct"):
            for part, suffix in (("value", ""), ("lo", "_lo"), ("hi", "_hi")):
                got, want = rows.loc[rec["cell_id"], term + suffix], rec[term][part]
                assert (want is None and np.isnan(got)) or got == want, (rec["cell_id"], term, part)
        noise = frame[(frame["kind"] == "noise") & (frame["budget"] == rec["budget"])].set_index("cell_id")
        assert sorted(noise.index) == sorted(p["cell_id"] for p in rec["L_noise"])
        for paired in rec["L_noise"]:
            for term in ("L_noise", "L_noise_unpaired"):
                got, want = noise.loc[paired["cell_id"], term], paired[term]["value"]
                assert (want is None and np.isnan(got)) or got == want


def test_samples_equal_the_samples_view_export_by_quadrant(results_db, tmp_path):
    for quadrant in ("all", "dissipation", "leakage", "unsupported"):
        frame = analysis.samples(results_db, "sweep", CLAIM_CELL, quadrant)
        out = tmp_path / f"{quadrant}.jsonl"
        cli(results_db, "export", "samples", "sweep", "--cell", CLAIM_CELL, "--quadrant", quadrant, "--out", out)
        assert plain(frame) == jsonl(out)
        assert dtypes(frame) == SAMPLE_TYPES
    every = analysis.samples(results_db, "sweep", CLAIM_CELL)
    assert len(every) == 300 and every["sample_id"].is_unique
    lost = analysis.samples(results_db, "sweep", CLAIM_CELL, "dissipation")
    assert len(lost) > 0 and (lost.h_vis == 1).all() and (lost.score < 1).all()
    tagged = every.set_index("sample_id")["tags"]
    assert sorted(tagged[tagged != ""].tolist()) == ["alias-miss annotation-error", "reasoning-fail"]
    assert analysis.samples(results_db, "sweep")["cell_id"].unique().tolist() == ["k1-b64-score"]  # the first cell


def test_claims_equal_their_export_and_average_to_the_report(results_db, tmp_path):
    frame = analysis.claims(results_db, "sweep")
    cli(results_db, "export", "claims", "sweep", "--out", tmp_path / "c.jsonl")
    assert plain(frame) == jsonl(tmp_path / "c.jsonl")
    assert len(frame) == 40 and frame["cell_id"].unique().tolist() == [CLAIM_CELL]
    store = analysis.connect(results_db)
    report = claims_by_cell(store, get_run(store, "sweep"), resamples=50)[CLAIM_CELL]
    store.close()
    for metric in ("support_ratio", "faithfulness", "hallucination"):
        assert frame[metric].mean() == pytest.approx(report[metric].mean), metric  # NaN skipped, as the report does
    cli(results_db, "export", "claims", "sweep", "--out", tmp_path / "c.parquet")
    pdt.assert_frame_equal(pd.read_parquet(tmp_path / "c.parquet"), frame, check_exact=True)


def test_compare_has_one_row_per_cell_and_term_as_the_json(results_db, capsys):
    frame = analysis.compare(results_db, "sweep", "other", resamples=200)
    capsys.readouterr()
    cli(results_db, "compare", "sweep", "other", "--resamples", 200, "--json")
    out = json.loads(capsys.readouterr().out)
    expected = [{"cell_a": c["cell_a"], "cell_b": c["cell_b"], "kind": "term", "term": t, "n": c["n"], "a": d["a"],
                 "b": d["b"], "delta": d["delta"]["value"], "delta_lo": d["delta"]["lo"], "delta_hi": d["delta"]["hi"],
                 "p": d["p"], "test": d["test"], "p_holm": d["p_holm"], "significant": d["significant"]}
                for c in out["cells"] for t, d in c["terms"].items()]
    assert plain(frame) == expected
    assert len(frame) == 3 * 7 and set(frame["kind"]) == {"term"}   # no claim run over "other": no claim rows
    # A unscored in k20: the pair is compared on its retrieval and interface terms only, the rest undefined.
    k20 = frame[frame.cell_a == UNSCORED_CELL].set_index("term")
    assert k20.loc[["S_llm", "Acc_hit", "D_rate"], ["a", "b", "delta", "p"]].isna().all().all()
    assert k20.loc["S_vis", "delta"] == 0 and k20.loc["S_vis", "test"] == "mcnemar"


def test_datasets_runs_and_tags_equal_the_listing_verbs(results_db, tmp_path, capsys):
    cli(results_db, "datasets", "--json")
    listed = json.loads(capsys.readouterr().out)
    frame = analysis.datasets(results_db)
    assert frame["name"].tolist() == [d["name"] for d in listed]
    assert frame.loc[0, "samples"] == listed[0]["samples"] == 300
    assert json.loads(frame.loc[0, "hops"]) == listed[0]["hops"]
    assert frame.loc[0, "created_at"] == pd.Timestamp(listed[0]["created_at"])
    cli(results_db, "runs", "--json")
    listed = json.loads(capsys.readouterr().out)
    frame = analysis.runs(results_db)
    assert plain(frame.drop(columns="created_at")) == [{k: r[k] for k in RUN_TYPES if k != "created_at"}
                                                        for r in listed]
    cli(results_db, "tags", "export", "--out", tmp_path / "t.jsonl")
    exported = jsonl(tmp_path / "t.jsonl")
    frame = analysis.tags(results_db)
    assert plain(frame) == [{"dataset": "metaqa", "sample_id": s["sample_id"], "tag": t, "note": s["note"],
                             "question": s["question"]} for s in exported for t in s["tags"]]
    assert len(frame) == 3


# -- dtypes --------------------------------------------------------------------------------------


def test_every_frame_has_its_fixed_dtypes_whatever_the_data(results_db):
    assert dtypes(analysis.events(results_db, "sweep")) == EVENT_TYPES
    assert dtypes(analysis.events(results_db, "other")) == EVENT_TYPES      # no oracle cell: k is still Int64
    assert dtypes(analysis.ledger(results_db, "sweep", resamples=50)) == LEDGER_TYPES
    assert dtypes(analysis.ledger(results_db, "other", resamples=50)) == LEDGER_TYPES  # no claim run
    assert dtypes(analysis.samples(results_db, "sweep", CLAIM_CELL, "error")) == SAMPLE_TYPES  # no row
    assert dtypes(analysis.claims(results_db, "sweep")) == CLAIM_TYPES
    empty = analysis.claims(results_db, "other")
    assert len(empty) == 0 and dtypes(empty) == CLAIM_TYPES
    assert dtypes(analysis.compare(results_db, "sweep", "other", resamples=50)) == COMPARE_TYPES
    assert dtypes(analysis.datasets(results_db)) == DATASET_TYPES
    assert dtypes(analysis.runs(results_db)) == RUN_TYPES
    assert dtypes(analysis.tags(results_db)) == TAG_TYPES
    for name, types in (("EVENT", EVENT_TYPES), ("LEDGER", LEDGER_TYPES), ("SAMPLE", SAMPLE_TYPES),
                        ("CLAIM", CLAIM_TYPES), ("COMPARE", COMPARE_TYPES), ("DATASET", DATASET_TYPES),
                        ("RUN", RUN_TYPES), ("TAG", TAG_TYPES)):
        assert {c: str(t) for c, t in getattr(analysis, f"{name}_DTYPES").items()} == types, name


def test_a_missing_run_cell_or_claim_run_is_not_found(results_db):
    with pytest.raises(analysis.NotFound, match="no run named 'nope'"):
        analysis.events(results_db, "nope")
    with pytest.raises(analysis.NotFound, match="no cell 'k7-b64-score'"):
        analysis.samples(results_db, "sweep", "k7-b64-score")
    with pytest.raises(analysis.NotFound, match="no claim run 99"):
        analysis.claims(results_db, "sweep", claim_run=99)
    with pytest.raises(EnvironmentFault, match="no such database"):
        analysis.runs(results_db.parent / "absent.db")
    assert not (results_db.parent / "absent.db").exists()


# -- Parquet -------------------------------------------------------------------------------------


def test_parquet_reads_back_through_pandas_and_duckdb(results_db, tmp_path):
    events = analysis.events(results_db, "sweep")
    ledger = analysis.ledger(results_db, "sweep", controls=True)
    cli(results_db, "export", "events", "sweep", "--out", tmp_path / "events.parquet")
    cli(results_db, "export", "ledger", "sweep", "--out", tmp_path / "ledger.parquet")
    cli(results_db, "export", "samples", "sweep", "--cell", CLAIM_CELL, "--out", tmp_path / "samples.pq")
    cli(results_db, "export", "claims", "sweep", "--format", "parquet", "--out", tmp_path / "claims.bin")
    for name, frame in (("events.parquet", events), ("ledger.parquet", ledger),
                        ("samples.pq", analysis.samples(results_db, "sweep", CLAIM_CELL)),
                        ("claims.bin", analysis.claims(results_db, "sweep"))):
        path = tmp_path / name
        pdt.assert_frame_equal(pd.read_parquet(path), frame, check_exact=True)
        assert pq.read_schema(path).names == list(frame.columns)     # plain columns, no index column
        assert duckdb.sql(f"SELECT count(*) FROM read_parquet('{path}')").fetchone()[0] == len(frame)
    path = tmp_path / "events.parquet"
    types = {row[0]: row[1] for row in duckdb.sql(f"DESCRIBE SELECT * FROM '{path}'").fetchall()}
    assert (types["sample_id"], types["k"], types["h_vis"], types["score"]) == ("VARCHAR", "BIGINT", "BIGINT", "DOUBLE")
    # Typed nulls: the oracle cells have no K, unscored jobs no score, and aggregates skip them.
    by_cell = duckdb.sql(f"SELECT cell_id, count(*), count(k), count(score), avg(score), sum(h_vis) FROM '{path}'"
                         " GROUP BY cell_id ORDER BY cell_id").fetchall()
    grouped = events.groupby("cell_id").agg(n=("sample_id", "size"), k=("k", "count"), scored=("score", "count"),
                                            mean=("score", "mean"), vis=("h_vis", "sum"))
    assert [r[:4] for r in by_cell] == [(c, g.n, g.k, g.scored) for c, g in grouped.iterrows()]
    for (cell, *_, mean, vis), (_, g) in zip(by_cell, grouped.iterrows()):
        assert (mean is None and np.isnan(g["mean"])) or mean == pytest.approx(g["mean"]), cell
        assert vis == g["vis"]
    # The README's query over the ledger: a mean of S_llm per format, undefined cells left out.
    got = duckdb.sql(f"SELECT format, avg(S_llm), count(S_llm) FROM '{tmp_path / 'ledger.parquet'}'"
                     " WHERE kind = 'retrieval' GROUP BY 1").fetchall()
    assert got == [("score", pytest.approx(ledger["S_llm"].mean()), 2)]
    meta = json.loads(pq.read_schema(tmp_path / "ledger.parquet").metadata[b"workbench"])
    assert (meta["export"], meta["run"], meta["resamples"], meta["score"]) == ("ledger", "sweep", 2000, "acc")
    # Every export carries the run's manifest (``runs show --json``) in its footer.
    store = open_store(results_db)
    manifest = get_manifest(store, get_run(store, "sweep").id)
    store.close()
    for name in ("events.parquet", "ledger.parquet", "samples.pq", "claims.bin"):
        assert json.loads(pq.read_schema(tmp_path / name).metadata[b"workbench_manifest"]) == manifest, name


def test_a_parquet_export_replaces_a_file_whole_or_not_at_all(results_db, tmp_path):
    out = tmp_path / "e.parquet"
    out.write_bytes(b"old")
    cli(results_db, "export", "events", "sweep", "--out", out, "--force")
    assert len(pd.read_parquet(out)) == 1800
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".e.parquet")) == []   # no temp file left
    before = out.read_bytes()
    assert main(["--db", str(results_db), "export", "samples", "sweep", "--cell", "nope", "--out", str(out),
                 "--force"]) == 2
    assert out.read_bytes() == before


def test_a_parquet_export_goes_to_stdout_for_dash(results_db, capsysbinary):
    assert main(["--db", str(results_db), "export", "claims", "sweep", "--format", "parquet", "--out", "-"]) == 0
    data = capsysbinary.readouterr().out
    assert data[:4] == b"PAR1" and data[-4:] == b"PAR1"


# -- read-only -----------------------------------------------------------------------------------


def test_the_api_never_writes(results_db):
    digest = hashlib.sha256(results_db.read_bytes()).hexdigest()
    led = analysis.ledger(results_db, "sweep", resamples=100)        # built in memory: nothing saved
    analysis.events(results_db, "sweep")
    analysis.samples(results_db, "sweep", CLAIM_CELL, "unsupported")
    analysis.claims(results_db, "sweep")
    analysis.compare(results_db, "sweep", "other", resamples=50)
    store = analysis.connect(results_db)
    assert store.readonly
    with pytest.raises(sqlite3.OperationalError, match="readonly"):
        store.conn.execute("DELETE FROM tags")
    with pytest.raises(EnvironmentFault, match="read-only"):
        with store.transaction():
            pass
    pdt.assert_frame_equal(analysis.ledger(store, "sweep", resamples=100), led, check_exact=True)  # a Store works too
    store.close()
    assert hashlib.sha256(results_db.read_bytes()).hexdigest() == digest
    con = sqlite3.connect(results_db)
    assert con.execute("SELECT count(*) FROM ledger_states").fetchone()[0] == 0
    assert con.execute("SELECT count(*) FROM tags").fetchone()[0] == 3
    con.close()
    # The CLI saves the state it builds; read from it, the frame is the same.
    cli(results_db, "ledger", "sweep", "--resamples", 100)
    pdt.assert_frame_equal(analysis.ledger(results_db, "sweep", resamples=100), led, check_exact=True)


def test_a_writer_goes_on_while_frames_are_read(results_db, tmp_path):
    reader = analysis.connect(results_db)
    writer = open_store(results_db)
    writer.conn.execute("PRAGMA busy_timeout = 0")        # waiting for a lock would fail at once
    run = get_run(writer, "sweep")
    late = [{"sample_id": s.id, "cell_id": UNSCORED_CELL, "prediction": s.answers[0]}
            for s in load_samples(writer, run.dataset_id)[:10]]
    with reader.snapshot():                               # a read transaction held open, as by a long read
        before = analysis.events(reader, "sweep")
        t0 = time.monotonic()
        assert import_predictions(writer, run, write_jsonl(tmp_path / "late.jsonl", late)).scored == 10
        add_tag(writer, run.dataset_id, sample_sid(writer, run.dataset_id, late[0]["sample_id"]), "late")
        assert time.monotonic() - t0 < 5
        during = analysis.events(reader, "sweep")
    # Inside the snapshot the run is read as of one instant; after it, with the writes.
    pdt.assert_frame_equal(during, before, check_exact=True)
    assert before.loc[before.cell_id == UNSCORED_CELL, "score"].isna().all()
    after = analysis.events(reader, "sweep")
    assert after.loc[after.cell_id == UNSCORED_CELL, "score"].notna().sum() == 10
    assert "late" in analysis.tags(reader)["tag"].tolist()
    reader.close()

    # Frames read over and over in another thread while the writer commits, none of it waiting.
    stop, rows = threading.Event(), []

    def read_frames():
        while not stop.is_set():
            rows.append(len(analysis.events(results_db, "sweep")))

    thread = threading.Thread(target=read_frames)
    thread.start()
    try:
        for i in range(30):
            add_tag(writer, run.dataset_id, 1 + i, f"busy-{i}")
            time.sleep(0.005)
    finally:
        stop.set()
        thread.join()
    writer.close()
    assert len(rows) >= 2 and set(rows) == {1800}
    assert analysis.tags(results_db)["tag"].str.startswith("busy-").sum() == 30


def test_the_streamed_event_records_are_the_tables_rows_in_its_order(results_db):
    """The CSV/JSONL exports read one cell at a time; the frames read the table: the same rows."""
    from workbench.data.exports import event_records
    from workbench.store.frames import event_table

    store = open_store(results_db)
    try:
        run = get_run(store, "sweep")
        # A score the table cannot hold as score·2^60 (read per row there) and one that is NULL.
        store.conn.execute("UPDATE events SET score = 0.1 WHERE run_id = ? AND sid = 1", (run.id,))
        streamed = list(event_records(store, run))
        assert streamed == event_table(store, run).to_pylist()
        assert len(streamed) == 1800 and any(r["score"] is None for r in streamed)
    finally:
        store.close()


def test_an_events_export_streams_the_first_rows_before_reading_the_run(results_db):
    """Once, a CSV or JSONL export read all 5M events into memory (1.4 GiB) before writing a line.
    Counted in SQLite steps (exact, where memory and time are noise): the first record costs a
    small part of the whole read."""
    from workbench.data.exports import event_records

    store = open_store(results_db)
    steps = [0]

    def tick() -> int:
        steps[0] += 1
        return 0

    try:
        run = get_run(store, "sweep")
        cells = store.conn.execute("SELECT count(*) FROM cells WHERE run_id = ?", (run.id,)).fetchone()[0]
        store.conn.set_progress_handler(tick, 10)
        records = event_records(store, run)
        next(records)
        first = steps[0]
        for _ in records:
            pass
        assert first * cells / 2 < steps[0]          # the first record came after about one cell's reading
    finally:
        store.close()
