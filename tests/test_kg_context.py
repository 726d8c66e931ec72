"""What the dedup judge sees about one entity (workbench.kg.context), and the sample dedup KG.

The example is an entity with graph relations and the source chunks they
were extracted from. Chunks come from the node, then its out edges, then its in edges,
deduplicated in that order, at most ``max_text_chunks``, each cut to ``chunk_max_chars``.
"""

from __future__ import annotations

import json
import unicodedata
from collections import defaultdict
from pathlib import Path

from workbench.kg.context import ContextConfig, EntityContext, collect_context, truncate

SAMPLE_DEDUP = Path(__file__).resolve().parents[1] / "sample_data" / "dedup"

# Kismet: directed and starred, plus one film pointing at it (a remake).
OUT = [("directed_by", "William Dieterle", ("c2", "c1")),
       ("starred_actors", "Marlene Dietrich", ("c3",))]
IN = [("Kismet (1955)", "remake_of", ("c4", "c2"))]
TEXT = {"c0": "Kismet is a 1944 film.", "c1": "Dieterle directed Kismet.", "c2": "Kismet, by Dieterle.",
        "c3": "Marlene Dietrich stars in Kismet.", "c4": "The 1955 Kismet remakes the 1944 film."}


def ids(ctx: EntityContext) -> list[str]:
    return [cid for cid, _ in ctx.chunks]


def test_chunks_come_from_node_then_out_edges_then_in_edges():
    ctx = collect_context("Kismet", OUT, IN, ["c0"], TEXT)
    assert ids(ctx) == ["c0", "c2", "c1", "c3", "c4"]


def test_dedup_keeps_the_first_occurrence_in_order():
    # c2 is cited by the first out edge and by the in edge: it is shown once, where first seen.
    # (list(set(ids)) would not do: its order changes from run to run.)
    ctx = collect_context("Kismet", OUT, IN, ["c3"], TEXT)
    assert ids(ctx) == ["c3", "c2", "c1", "c4"]


def test_at_most_max_text_chunks():
    ctx = collect_context("Kismet", OUT, IN, ["c0"], TEXT, ContextConfig(max_text_chunks=2))
    assert ids(ctx) == ["c0", "c2"]
    assert collect_context("Kismet", OUT, IN, ["c0"], TEXT, ContextConfig(max_text_chunks=0)).chunks == ()


def test_each_chunk_is_cut_to_chunk_max_chars_with_an_ellipsis():
    ctx = collect_context("Kismet", OUT, [], [], TEXT, ContextConfig(chunk_max_chars=12))
    assert dict(ctx.chunks) == {"c2": "Kismet, by…", "c1": "Dieterle di…", "c3": "Marlene Die…"}
    assert all(len(text) <= 12 for _, text in ctx.chunks)
    assert truncate("Kismet, by Dieterle.", 20) == "Kismet, by Dieterle."  # fits: unchanged, no "…"


def test_include_text_context_false_gives_relations_only():
    ctx = collect_context("Kismet", OUT, IN, ["c0"], TEXT, ContextConfig(include_text_context=False))
    assert ctx.chunks == ()
    assert "Original text contexts" not in ctx.render()
    assert len(ctx.relations) == 3


def test_relations_list_out_edges_before_in_edges_up_to_max_relations():
    ctx = collect_context("Kismet", OUT, IN, [], TEXT)
    assert ctx.relations == ("→ directed_by → William Dieterle", "→ starred_actors → Marlene Dietrich",
                             "← remake_of ← Kismet (1955)")
    short = collect_context("Kismet", OUT, IN, [], TEXT, ContextConfig(max_relations=2))
    assert short.relations == ctx.relations[:2]  # the in edge is the one dropped
    # Chunks still come from every edge: the relation budget only trims the graph part.
    assert "c4" in ids(short)


def test_missing_chunk_ids_are_skipped_without_using_a_slot():
    ctx = collect_context("Kismet", OUT, IN, ["gone", "c0"], TEXT, ContextConfig(max_text_chunks=2))
    assert ids(ctx) == ["c0", "c2"]


def test_render_exact_text():
    ctx = collect_context("Kismet", OUT[:1], IN, ["c0"], TEXT, ContextConfig(max_text_chunks=2, chunk_max_chars=15))
    assert ctx.render() == (
        "Graph relations:\n"
        "  - → directed_by → William Dieterle\n"
        "  - ← remake_of ← Kismet (1955)\n"
        "Original text contexts:\n"
        "  - (c0) Kismet is a 19…\n"
        "  - (c2) Kismet, by Die…"
    )
    isolated = collect_context("Orphan", [], [], [], {})
    assert isolated.render() == "Graph relations:\n  - (none)"


# --- the sample dedup KG (scripts/make_dedup_kg.py) ---------------------------------------

def _rows(name: str) -> list[dict]:
    with open(SAMPLE_DEDUP / name, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def _norm(s: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", s).casefold().split())


def test_sample_dedup_kg_is_consistent_and_has_duplicates_and_traps():
    kb, chunks, gold_rows = _rows("kb.jsonl"), _rows("chunks.jsonl"), _rows("gold_clusters.jsonl")
    chunk_ids = {c["chunk_id"] for c in chunks}
    assert len(chunk_ids) == len(chunks)
    assert all(c in chunk_ids for row in kb for c in row["source_chunks"])
    assert all(row["source_chunks"] for row in kb)  # every triple cites where it came from

    entities = {x for row in kb for x in (row["triple"][0], row["triple"][2])}
    gold_names = [g["entity"] for g in gold_rows]
    assert sorted(gold_names) == sorted(entities)  # exactly one gold line per entity
    gold = {g["entity"]: g["cluster"] for g in gold_rows}

    members = defaultdict(list)
    for name, label in gold.items():
        members[label].append(name)
    assert sum(1 for m in members.values() if len(m) >= 2) >= 50

    by_key = defaultdict(list)
    for name in gold:
        by_key[_norm(name)].append(name)
    traps = [names for names in by_key.values() if len(names) >= 2 and len({gold[n] for n in names}) > 1]
    assert len(traps) >= 10

    # The contexts of a trap pair tell the two sides apart (here: the film vs the actor).
    out_edges, in_edges = defaultdict(list), defaultdict(list)
    for row in kb:
        h, r, t = row["triple"]
        out_edges[h].append((r, t, tuple(row["source_chunks"])))
        in_edges[t].append((h, r, tuple(row["source_chunks"])))
    text = {c["chunk_id"]: c["text"] for c in chunks}
    film = collect_context("Lemmy", out_edges["Lemmy"], in_edges["Lemmy"], [], text).render()
    actor = collect_context("LEMMY", out_edges["LEMMY"], in_edges["LEMMY"], [], text).render()
    assert "→ starred_actors → LEMMY" in film and "← starred_actors ← Lemmy" in actor
    assert "the actor LEMMY" in actor
