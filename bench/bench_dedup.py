"""Benchmark: dedup candidate generation on 100,000 synthetic entities (docs/design.md §8).

The names are people ("Steven Spielberg"), film-like titles ("The Silent River") and
organisations ("National Film Board"), seeded. About 10% of the entities are planted
duplicates of another entity, written as a variant: case, an initialled first name
("S. Spielberg"), a typo, reordered tokens ("Spielberg, Steven"), an abbreviation
("NFB", "N.F.B."), an accent or "&". Every entity links to ~3 of 40,000 film/genre
nodes; a duplicate keeps most of its original's links; half the entities also link to
one of 8 hub nodes ("English", "Drama"). The gold pairs are all pairs of a planted
cluster, so pairs-completeness is the blocking recall the judge can at best reach.

Prints one JSON line per run, like the other benchmarks: names and neighbours, then the
same plus a 32-d embedding kNN (a duplicate's vector is its original's plus noise of
per-dimension sd 0.1–0.6, i.e. cosine ≈ 0.86–0.995; everything else is random).
"""

from __future__ import annotations

import json
import random
import resource
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from workbench.kg.candidates import generate_candidates, gold_pairs_from_clusters, pairs_completeness  # noqa: E402

FIRST = """James Mary John Patricia Robert Jennifer Michael Linda William Elizabeth David Barbara Richard
Susan Joseph Jessica Thomas Sarah Charles Karen Christopher Nancy Daniel Lisa Matthew Betty Anthony Margaret
Mark Sandra Donald Ashley Steven Kimberly Paul Emily Andrew Donna Joshua Michelle Kenneth Dorothy Kevin Carol
Brian Amanda George Melissa Edward Deborah Ronald Stephanie Timothy Rebecca Jason Sharon Jeffrey Laura Ryan
Cynthia Jacob Kathleen Gary Amy Nicholas Shirley Eric Angela Jonathan Helen Stephen Anna Larry Brenda Justin
Pamela Scott Nicole Brandon Emma Benjamin Samantha Samuel Katherine Gregory Christine Frank Debra Alexander
Rachel Raymond Catherine Patrick Carolyn Jack Janet Dennis Ruth Jerry Maria Tyler Heather Aaron Diane Jose
Virginia Adam Julie Henry Joyce Nathan Victoria Douglas Olivia Zachary Kelly Peter Christina Kyle Lauren
Walter Joan Ethan Evelyn Jeremy Judith Harold Megan Keith Cheryl Christian Andrea Roger Hannah Noah Martha
Gerald Jacqueline Carl Frances Terry Gloria Sean Ann Austin Teresa Arthur Kathryn Lawrence Sara Jesse Janice
Dylan Jean Bryan Alice Joe Madison Jordan Doris Billy Abigail Bruce Julia Albert Judy Willie Grace Gabriel
Denise Logan Amber Alan Marilyn Juan Beverly Wayne Danielle Roy Theresa Ralph Sophia Randy Marie Eugene Diana
Vincent Brittany Russell Natalie Elijah Isabella Louis Charlotte Bobby Rose Philip Alexis Johnny Kayla Akira
Ingmar Federico Agnes Wong Satyajit Yasujiro Krzysztof Pedro Werner Fritz Jean-Luc Sofia Chloé Renée""".split()
LAST = """Smith Johnson Williams Brown Jones Garcia Miller Davis Rodriguez Martinez Hernandez Lopez Gonzalez
Wilson Anderson Thomas Taylor Moore Jackson Martin Lee Perez Thompson White Harris Sanchez Clark Ramirez Lewis
Robinson Walker Young Allen King Wright Scott Torres Nguyen Hill Flores Green Adams Nelson Baker Hall Rivera
Campbell Mitchell Carter Roberts Gomez Phillips Evans Turner Diaz Parker Cruz Edwards Collins Reyes Stewart
Morris Morales Murphy Cook Rogers Gutierrez Ortiz Morgan Cooper Peterson Bailey Reed Kelly Howard Ramos Kim
Cox Ward Richardson Watson Brooks Chavez Wood James Bennett Gray Mendoza Ruiz Hughes Price Alvarez Castillo
Sanders Patel Myers Long Ross Foster Jimenez Spielberg Kubrick Kurosawa Bergman Fellini Varda Kieslowski
Almodovar Herzog Lang Godard Coppola Scorsese Tarantino Hitchcock Welles Truffaut Ozu Tarkovsky Antonioni""".split()
SYLLABLES = "ka lo mi ren to sa vin dor el qu bra zet mar son ley ton ber gen stein ko wa ri na ell".split()
ADJ = """Silent Dark Golden Last Lost Hidden Broken Eternal Wild Secret Red Blue Crimson Frozen Burning
Distant Forgotten Little Great Final Empty Quiet Lonely Bright Savage Gentle Endless Bitter Sweet Strange
Holy Iron Velvet Glass Midnight Electric Northern Southern Western Eastern Shadow Hollow Sacred Cruel""".split()
NOUN = """River Night City Heart Road Dream Sky Star War House Garden Island Mountain Storm Sea Fire Ghost
King Queen Empire Kingdom Forest Desert Winter Summer Moon Sun Shadow Mirror Door Window Bridge Train Letter
Promise Journey Horizon Harbor Valley Frontier Machine Angel Devil Stranger Hunter Thief Soldier Brother Sister
Father Mother Daughter Son Lover Witness Circle Game Voice Song Dance Silence Memory Truth Lie Secret Return""".split()
ORG_A = "National United International Royal Federal Pacific Atlantic Global Central European Asian Metro".split()
ORG_B = "Film Cinema Broadcasting Television Arts Media Picture Studio Theatre Music Screen Drama".split()
ORG_C = "Board Institute Association Council Society Academy Guild Company Corporation Foundation".split()
N, DUP_SHARE, FILM_NODES, HUBS = 100_000, 0.10, 40_000, 8


def base_name(rng: random.Random, kind: str) -> str:
    """One original entity name of ``kind`` (person, title or org)."""
    if kind == "person":
        last = rng.choice(LAST) if rng.random() < 0.3 else "".join(
            rng.choice(SYLLABLES) for _ in range(rng.randint(2, 3))).title()
        middle = f" {rng.choice(FIRST)[0]}." if rng.random() < 0.1 else ""
        return f"{rng.choice(FIRST)}{middle} {last}"
    if kind == "org":
        return f"{rng.choice(ORG_A)} {rng.choice(ORG_B)} {rng.choice(ORG_C)}"
    shape = rng.random()
    if shape < 0.25:
        return f"The {rng.choice(ADJ)} {rng.choice(NOUN)}"
    if shape < 0.5:
        return f"{rng.choice(NOUN)} of the {rng.choice(ADJ)} {rng.choice(NOUN)}"
    if shape < 0.75:
        return f"The {rng.choice(NOUN)} and the {rng.choice(NOUN)}"
    return f"{rng.choice(ADJ)} {rng.choice(NOUN)} {rng.randint(2, 1999)}"


def typo(rng: random.Random, name: str) -> str:
    """One swap, deletion, insertion or substitution inside a token of ≥ 5 letters."""
    tokens = name.split()
    spots = [i for i, t in enumerate(tokens) if len(t) >= 5 and t.isalpha()]
    if not spots:
        return name.upper()
    i = rng.choice(spots)
    t, p = tokens[i], rng.randrange(1, len(tokens[i]) - 1)
    op = rng.randrange(4)
    t = (t[:p] + t[p + 1] + t[p] + t[p + 2:] if op == 0 else t[:p] + t[p + 1:] if op == 1
         else t[:p] + rng.choice("aeiourstn") + t[p:] if op == 2 else t[:p] + rng.choice("aeiou") + t[p + 1:])
    tokens[i] = t
    return " ".join(tokens)


def variant(rng: random.Random, name: str, kind: str) -> str:
    """A planted duplicate's surface form of ``name``."""
    tokens = name.split()
    roll = rng.random()
    if kind == "org" and roll < 0.6:
        acronym = "".join(t[0] for t in tokens)
        return acronym if rng.random() < 0.6 else ".".join(acronym) + "."
    if roll < 0.2:
        return rng.choice([name.upper(), name.lower(), f"  {name} "])
    if roll < 0.4 and kind == "person":
        return f"{tokens[0][0]}. {' '.join(tokens[1:])}"
    if roll < 0.6:
        return typo(rng, name)
    if roll < 0.75 and kind == "person":
        return f"{tokens[-1]}, {' '.join(tokens[:-1])}"
    if roll < 0.75 and kind == "title" and tokens[0] == "The":
        return f"{' '.join(tokens[1:])}, The"
    if roll < 0.85:
        return name.replace("e", "é", 1) if "e" in name else name.replace(" of ", " & ")
    return typo(rng, name.lower())


def synthesize(n: int = N, seed: int = 4):
    """Names, neighbour sets and gold cluster labels for ``n`` entities."""
    rng = random.Random(seed)
    kinds = rng.choices(["person", "title", "org"], weights=[60, 37, 3], k=n)
    names: list[str] = []
    links: list[set[int]] = []
    clusters: list[str | None] = []
    originals: list[int] = []
    for i in range(n):
        if originals and rng.random() < DUP_SHARE:
            o = rng.choice(originals)
            kinds[i] = kinds[o]
            names.append(variant(rng, names[o], kinds[o]))
            kept = {v for v in links[o] if rng.random() < 0.8}
            if rng.random() < 0.3:
                kept.add(n + rng.randrange(FILM_NODES))
            links.append(kept)
            clusters[o] = clusters[o] or f"c{o}"
            clusters.append(clusters[o])
        else:
            names.append(base_name(rng, kinds[i]))
            own = {n + rng.randrange(FILM_NODES) for _ in range(rng.randint(2, 4))}
            if rng.random() < 0.5:
                own.add(n + FILM_NODES + rng.randrange(HUBS))
            links.append(own)
            clusters.append(None)
            originals.append(i)
    return names, links, clusters


def embed(clusters: list[str | None], dim: int = 32, seed: int = 4) -> np.ndarray:
    """Random vectors; a planted duplicate's is its cluster root's plus noise."""
    rng = np.random.default_rng(seed)
    vectors = rng.standard_normal((len(clusters), dim)).astype(np.float32)
    for i, label in enumerate(clusters):
        root = int(label[1:]) if label else i
        if root != i:
            vectors[i] = vectors[root] + rng.uniform(0.1, 0.6) * rng.standard_normal(dim)
    return vectors


def dedup_candidates(n: int = N, embeddings: bool = False) -> dict:
    """Time generate_candidates on ``n`` synthetic entities and score it against the gold."""
    names, links, clusters = synthesize(n)
    gold = gold_pairs_from_clusters(clusters)
    vectors = embed(clusters) if embeddings else None
    candidates, stats = generate_candidates(names, links, embeddings=vectors)
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"bench": "dedup_candidates" + ("_with_embeddings" if embeddings else ""), "entities": n, "planted_duplicates": sum(c is not None for c in clusters)
            - len({c for c in clusters if c}), "gold_pairs": len(gold), "seconds": round(stats["seconds"], 1),
            "target_s": 60, "pass": stats["seconds"] < 60, "candidate_pairs": stats["candidate_pairs"],
            "reduction_ratio": round(stats["reduction_ratio"], 7),
            "pairs_completeness": round(pairs_completeness(candidates, gold), 4),
            "by_reason": stats["by_reason"], "comparisons": stats["comparisons"],
            "oversized_blocks": stats["oversized_blocks"], "skipped_blocks": stats["skipped_blocks"],
            "hub_neighbours": stats["hub_neighbours"], "peak_rss_mib": round(peak_mib)}


if __name__ == "__main__":
    for with_embeddings in (False, True):
        start = time.perf_counter()
        result = dedup_candidates(embeddings=with_embeddings)
        result["wall_seconds"] = round(time.perf_counter() - start, 1)  # includes synthesis
        print(json.dumps(result, ensure_ascii=False), flush=True)
