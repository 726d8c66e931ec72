"""Dedup end to end on a tiny real KG: import with provenance, candidates, a judge (SmolLM2's recorded verdicts),
real embeddings, merges, export, eval."""

from __future__ import annotations

import json

import pytest

from conftest import write_tiny_kg
from replay import replay_llm
from workbench.cli import main
from workbench.data.errors import InputRejected
from workbench.kg.importer import import_kg
from workbench.kg.merges import clusters, decide, evaluate, export_kg, merged_pairs, proposals
from workbench.kg.runner import DedupConfig, execute_dedup, get_dedup_run, plan_dedup

@pytest.fixture
def kg_dir(tmp_path):
    return write_tiny_kg(tmp_path / "kg")


def test_a_kg_imports_with_its_chunks_and_gold_and_a_reimport_is_a_no_op(store, kg_dir):
    report = import_kg(store, kg_dir, "tiny")
    assert (report.triples, report.entities, report.chunks, report.gold) == (6, 10, 4, 10)
    assert import_kg(store, kg_dir, "tiny").unchanged
    chunks = store.conn.execute("SELECT chunks FROM kg_triples WHERE tid = 1").fetchone()[0]
    assert json.loads(chunks) == ["c2"]


@pytest.mark.parametrize("file, line, expected", [
    ("kb.jsonl", '{"triple": ["A", "r", "B"], "source_chunks": ["nope"]}',
     "kb.jsonl:7: $.source_chunks: chunk 'nope' is not in chunks.jsonl"),
    ("kb.jsonl", '{"triple": ["A", "r"]}', "kb.jsonl:7: $.triple: expected 3 elements"),
    ("kb.jsonl", '{"triple": ["Kismet", "directed_by", "William Dieterle"]}', "kb.jsonl:7: $.triple: duplicate triple"),
    ("gold_clusters.jsonl", '{"entity": "Nobody", "cluster": "x"}',
     "gold_clusters.jsonl:11: $.entity: 'Nobody' is not an entity of kb.jsonl"),
    ("chunks.jsonl", '{"chunk_id": "c1", "text": "again"}', "chunks.jsonl:5: $.chunk_id: duplicate chunk id 'c1'"),
])
def test_bad_kg_lines_name_file_line_and_field_and_nothing_is_written(store, kg_dir, file, line, expected):
    with open(kg_dir / file, "a", encoding="utf-8") as fh:
        fh.write(line + "\n")
    with pytest.raises(InputRejected) as err:
        import_kg(store, kg_dir, "bad")
    assert expected in str(err.value)
    assert store.conn.execute("SELECT count(*) FROM kgs").fetchone()[0] == 0


def test_a_judge_run_stores_parsed_verdicts_with_their_contexts(store, kg_dir):
    """SmolLM2's recorded verdicts on this KG (tests/replay.py: the same on every CPU) through the real pass and its
    cache: what is stored, parsed and resumed is the subject. The judge generating for real is
    tests/test_served_pipelines.py's dedup test (in-process and served)."""
    import_kg(store, kg_dir, "tiny")
    name, created, stats = plan_dedup(store, "tiny", DedupConfig(), "tiny-run")
    assert created and stats["candidate_pairs"] >= 2 and stats["pairs_completeness"] is not None
    report = execute_dedup(store, name, llm=replay_llm(store, "judged"))
    assert report.errors == 0 and report.done == stats["candidate_pairs"] * 2 and report.model_calls > 0
    rows = store.conn.execute("SELECT mode, is_coreferent, confidence, context_a, context_b FROM dedup_verdicts"
                              " WHERE status = 'done'").fetchall()
    assert len(rows) == report.done
    for mode, coreferent, confidence, ctx_a, ctx_b in rows:
        assert coreferent in (0, 1) and 0.0 <= confidence <= 1.0
        assert "Graph relations:" in ctx_a and "Graph relations:" in ctx_b
        assert ("Original text contexts:" in ctx_a + ctx_b) == (mode == "graph+text")
    # Resuming recomputes nothing.
    assert execute_dedup(store, name).jobs == 0


@pytest.mark.real_model
@pytest.mark.budget(15)
def test_the_embedding_mode_needs_no_model_argument_and_embeds_each_context_once(store, kg_dir):
    import_kg(store, kg_dir, "tiny")
    name, _, stats = plan_dedup(store, "tiny", DedupConfig(modes=("embedding",)), "by-embedding")
    report = execute_dedup(store, name)
    assert report.errors == 0 and report.done == stats["candidate_pairs"] and report.model_calls == 0
    rows = store.conn.execute("SELECT is_coreferent, confidence FROM dedup_verdicts WHERE status = 'done'").fetchall()
    assert len(rows) == report.done and all(c in (0, 1) and 0.0 <= p <= 1.0 for c, p in rows)
    embedded = store.conn.execute("SELECT count(*) FROM embeddings").fetchone()[0]
    assert 0 < embedded <= 2 * stats["candidate_pairs"]           # a context shared by two pairs is embedded once


def test_decisions_override_the_threshold_merges_are_transitive_and_reverting_recomputes(store, kg_dir):
    import_kg(store, kg_dir, "tiny")
    name, _, _ = plan_dedup(store, "tiny", DedupConfig(modes=("graph",)), "manual")
    run_id = get_dedup_run(store, name).id
    # No verdicts yet: merges come from decisions only.
    ids = {n: e for e, n in store.conn.execute("SELECT eid, name FROM kg_entities")}
    pairs = {(a, b) for a, b in store.conn.execute("SELECT a, b FROM dedup_pairs WHERE run_id = ?", (run_id,))}
    full, initial, lower = ids["William Dieterle"], ids["W. Dieterle"], ids["william dieterle"]
    p1, p2 = tuple(sorted((full, initial))), tuple(sorted((full, lower)))
    assert p1 in pairs and p2 in pairs
    # Scripted verdicts: the judge links each variant to the full name only.
    store.conn.execute("UPDATE dedup_verdicts SET status = 'done', is_coreferent = ((a, b) IN (VALUES (?, ?), (?, ?))),"
                       " confidence = 0.95, context_a = 'a', context_b = 'b' WHERE run_id = ?", (*p1, *p2, run_id))
    store.conn.commit()
    assert merged_pairs(store, run_id, "graph", 0.9) == sorted([p1, p2])
    _, labels = clusters(store, name, "graph", threshold=0.9)
    assert labels[full] == labels[initial] == labels[lower]     # initial ~ lower, transitively through the full name
    decide(store, name, *p1, "graph", "rejected")               # revert one merge
    _, labels = clusters(store, name, "graph", threshold=0.9)
    assert labels[full] == labels[lower] != labels[initial]
    assert p1 not in merged_pairs(store, run_id, "graph", 0.9)
    out = export_kg(store, name, "graph", store.path.parent / "out", threshold=0.9)
    aliases = [json.loads(x) for x in (store.path.parent / "out" / "aliases.jsonl").read_text().splitlines()]
    # Equal degree and length: the representative is the first seen (the stated rule's last tie-break).
    assert [(a["entity"], a["aliases"]) for a in aliases] == [("William Dieterle", ["william dieterle"])]
    kb = [json.loads(x)["triple"] for x in (store.path.parent / "out" / "kb.jsonl").read_text().splitlines()]
    assert ["Juarez", "directed_by", "W. Dieterle"] in kb      # the rejected merge is not applied
    assert out["merges"] >= 1
    assert all(p.decision == "rejected" for p in proposals(store, name, "graph") if (p.a, p.b) == p1)


def test_dedup_eval_prints_pairwise_and_bcubed_for_both_modes(store, kg_dir, capsys):
    import_kg(store, kg_dir, "tiny")
    name, _, _ = plan_dedup(store, "tiny", DedupConfig(), "evald")
    run_id = get_dedup_run(store, name).id
    # Scripted verdicts (the metrics do not depend on the model): graph+text merges the Dieterles.
    store.conn.execute("UPDATE dedup_verdicts SET status = 'done', is_coreferent = (mode = 'graph+text'),"
                       " confidence = 0.9 WHERE run_id = ?", (run_id,))
    store.conn.commit()
    r = evaluate(store, name, resamples=200)
    assert r["modes"]["graph"].bcubed_precision.value == 1.0
    assert r["modes"]["graph+text"].bcubed_recall.value > r["modes"]["graph"].bcubed_recall.value
    assert main(["--db", str(store.path), "dedup", "eval", name, "--resamples", "200"]) == 0
    out = capsys.readouterr().out
    assert "graph+text − graph" in out and "B³ F1" in out and "pair F1" in out and "pairs-completeness" in out
