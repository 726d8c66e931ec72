"""Build sample_data/dedup: a MetaQA-derived KG with planted duplicates and same-name traps.

Deterministic for a given --seed. Reads <source>/kb.jsonl (default ../shared/data/metaqa-dev
relative to the repo) and writes kb.jsonl, chunks.jsonl, gold_clusters.jsonl and README.md
to --dest (default sample_data/dedup). See the README it writes for the derivation.

Usage: python scripts/make_dedup_kg.py [--source DIR] [--dest DIR] [--seed N]
"""

from __future__ import annotations

import argparse
import json
import random
import re
import unicodedata
from collections import Counter, defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PEOPLE_RELS = ("directed_by", "written_by", "starred_actors")
PEOPLE_FILMS = 4  # films pulled in per curated person: enough mentions to split between two surfaces

# Curated person duplicates: original -> [(variant, kind), ...]. Real spellings where one
# exists (Seastrom was Sjöström's Hollywood credit; Chiau is Stephen Chow's Cantonese one).
PEOPLE = {
    "Andrei Tarkovsky": [("Andrey Tarkovskiy", "transliteration"), ("A. Tarkovsky", "initials")],
    "Leo Tolstoy": [("Lev Tolstoy", "transliteration")],
    "Alejandro Jodorowsky": [("Alejandro Jodorowski", "transliteration")],
    "Roman Polanski": [("Roman Polański", "transliteration")],
    "Nikita Mikhalkov": [("Nikita Michalkow", "transliteration")],
    "Milcho Manchevski": [("Milčo Mančevski", "transliteration")],
    "Stephen Chow": [("Stephen Chiau", "transliteration")],
    "Jackie Chan": [("Jacky Chan", "transliteration")],
    "Victor Sjöström": [("Victor Seastrom", "transliteration")],
    "Alexander Skarsgård": [("Alexander Skarsgaard", "transliteration")],
    "Ulrich Mühe": [("Ulrich Muehe", "transliteration")],
    "Philipp Stölzl": [("Philipp Stoelzl", "transliteration")],
    "Volker Schlöndorff": [("Volker Schloendorff", "transliteration")],
    "Pedro Almodóvar": [("Pedro Almodovar", "diacritics")],
    "François Truffaut": [("Francois Truffaut", "diacritics"), ("FRANÇOIS TRUFFAUT", "case")],
    "Luis Buñuel": [("Luis Bunuel", "diacritics")],
    "Gérard Depardieu": [("Gerard Depardieu", "diacritics")],
    "Penélope Cruz": [("Penelope Cruz", "diacritics")],
    "Alfonso Cuarón": [("Alfonso Cuaron", "diacritics")],
    "Gian Maria Volonté": [("Gian Maria Volonte", "diacritics")],
    "Agnès Varda": [("Agnes Varda", "diacritics")],
    "Aki Kaurismäki": [("Aki Kaurismaki", "diacritics")],
    "Lasse Hallström": [("Lasse Hallstrom", "diacritics")],
    "Baltasar Kormákur": [("Baltasar Kormakur", "diacritics")],
    "Jeroen Krabbé": [("Jeroen Krabbe", "diacritics")],
    "Akira Kurosawa": [("Kurosawa Akira", "reordered"), ("A. Kurosawa", "initials")],
    "Hayao Miyazaki": [("Miyazaki Hayao", "reordered")],
    "Kenji Mizoguchi": [("Mizoguchi Kenji", "reordered")],
    "Rainer Werner Fassbinder": [("R.W. Fassbinder", "acronym"), ("Fassbinder, Rainer Werner", "reordered")],
    "J.K. Simmons": [("JK Simmons", "acronym")],
    "I.A.L. Diamond": [("I. A. L. Diamond", "acronym")],
    "L.Q. Jones": [("LQ Jones", "acronym")],
    "W.R. Burnett": [("W. R. Burnett", "acronym")],
    "Samuel L. Jackson": [("Samuel Jackson", "middle_initial")],
    "Michael J. Fox": [("Michael Fox", "middle_initial")],
    "Joseph L. Mankiewicz": [("Joseph Mankiewicz", "middle_initial")],
    "William A. Wellman": [("William Wellman", "middle_initial")],
    "Alan J. Pakula": [("Alan Pakula", "middle_initial")],
    "Edward G. Robinson": [("Edward Robinson", "middle_initial")],
}

# Curated film-title duplicates.
FILMS = {
    "Arsenic and Old Lace": ("Arsenic & Old Lace", "title_ampersand"),
    "Guys and Dolls": ("Guys & Dolls", "title_ampersand"),
    "Four Weddings and a Funeral": ("Four Weddings & a Funeral", "title_ampersand"),
    "Harry and the Hendersons": ("Harry & the Hendersons", "title_ampersand"),
    "Days of Wine and Roses": ("Days of Wine & Roses", "title_ampersand"),
    "Back to the Future Part III": ("Back to the Future Part 3", "title_numeral"),
    "The Hangover Part II": ("The Hangover 2", "title_numeral"),
    "Rocky IV": ("Rocky 4", "title_numeral"),
    "Toy Story 3": ("Toy Story III", "title_numeral"),
    "Spider-Man 2": ("Spider-Man II", "title_numeral"),
    "The Karate Kid, Part II": ("The Karate Kid II", "title_numeral"),
    "The Adventures of Tintin": ("The Adventures of Tintin: The Secret of the Unicorn", "title_subtitle"),
    "Hoodwinked Too! Hood vs. Evil": ("Hoodwinked Too!", "title_subtitle"),
    "Indiana Jones and the Temple of Doom": ("Indiana Jones: Temple of Doom", "title_subtitle"),
    "Indiana Jones and the Kingdom of the Crystal Skull": ("Indiana Jones 4", "title_subtitle"),
    "Austin Powers in Goldmember": ("Austin Powers: Goldmember", "title_subtitle"),
    "The Godfather": ("Godfather, The", "title_article"),
    "The Great Escape": ("Great Escape", "title_article"),
    "The Exorcist": ("Exorcist", "title_article"),
    "The Terminator": ("Terminator, The", "title_article"),
    "Dr. Jekyll and Mr. Hyde": ("Doctor Jekyll and Mister Hyde", "title_abbreviation"),
    "St. Elmo's Fire": ("Saint Elmo's Fire", "title_abbreviation"),
    "Freddy vs. Jason": ("Freddy versus Jason", "title_abbreviation"),
    "Mr. Smith Goes to Washington": ("Mister Smith Goes to Washington", "title_abbreviation"),
    "The Bells of St. Mary's": ("The Bells of Saint Mary's", "title_abbreviation"),
    "G.I. Jane": ("GI Jane", "acronym"),
    "D.O.A.": ("DOA", "acronym"),
    "I.Q.": ("IQ", "acronym"),
}

# Same-name traps. MetaQA itself conflates a film and a person/genre/language of the same
# name into one node; we split them again. A node is its name string, so the two sides
# must differ: one side gets a case-only variant (survives NFC/NFKC and whitespace
# normalization, collides under casefold). name -> (side that is re-cased, new surface).
TRAPS = {
    "David Copperfield": ("other", "DAVID COPPERFIELD"),
    "Hans Christian Andersen": ("film", "HANS CHRISTIAN ANDERSEN"),
    "Harry Brown": ("other", "harry brown"),
    "James Dean": ("film", "JAMES DEAN"),
    "Jesse James": ("other", "jesse james"),
    "John Carter": ("film", "JOHN CARTER"),
    "Lemmy": ("other", "LEMMY"),
    "Little Richard": ("film", "little richard"),
    "Malcolm X": ("other", "MALCOLM X"),
    "Tabu": ("other", "tabu"),
    "Romance": ("film", "ROMANCE"),
    "War": ("film", "WAR"),
    "Western": ("film", "WESTERN"),
    "Dutch": ("film", "DUTCH"),
    "Zulu": ("other", "zulu"),
}
# Natural traps already in MetaQA: a film vs the lower-case topic tag of the same name.
TAG_TRAPS = ("Dracula", "Frankenstein", "Sherlock Holmes", "Godzilla", "Chicago", "Texas")

GENERIC = (("case", 12), ("initials", 10), ("reordered", 5))  # extra person variants: kind, how many
ROLE = {"directed_by": "director", "written_by": "writer", "starred_actors": "actor",
        "release_year": "year", "has_genre": "genre", "in_language": "language", "has_tags": "tag"}


def norm(s: str) -> str:
    """The exact-match key of docs/design.md §8: NFKC, casefold, whitespace collapsed."""
    return " ".join(unicodedata.normalize("NFKC", s).casefold().split())


def generic_variant(name: str, kind: str, rng: random.Random) -> str | None:
    parts = name.split()
    if kind == "case":
        return name.lower() if rng.random() < 0.6 else name.upper()
    if len(parts) != 2 or not all(p.isalpha() for p in parts):
        return None  # initials/reordering are only unambiguous on plain "First Last" names
    if kind == "initials":
        return f"{parts[0][0]}. {parts[1]}"
    return f"{parts[1]}, {parts[0]}"


def load(source: Path) -> list[tuple[str, str, str]]:
    rows = [json.loads(line)["triple"] for line in open(source / "kb.jsonl", encoding="utf-8")]
    return [tuple(unicodedata.normalize("NFC", x) for x in t) for t in rows]


def select_films(kb):
    """Films: curated duplicates, traps and their counterparts, PEOPLE_FILMS films per curated person."""
    by_head = defaultdict(list)
    for t in kb:
        by_head[t[0]].append(t)
    size = {h: len(v) for h, v in by_head.items()}
    films: dict[str, None] = {}  # insertion-ordered set

    def add(titles, k=None):
        ranked = sorted(set(titles), key=lambda f: (-size.get(f, 0), f))  # richest films first
        for f in ranked[:k]:
            films.setdefault(f)

    add(FILMS)
    for name in TRAPS:
        add([name])
        add([h for h, r, t in kb if t == name and r != "has_tags"], 2)
    for name in TAG_TRAPS:
        add([name])
        add([h for h, r, t in kb if t == name.lower() and r == "has_tags" and h != name], 2)
    for person in PEOPLE:
        add([h for h, r, t in kb if t == person and r in PEOPLE_RELS], PEOPLE_FILMS)
    missing = [f for f in films if f not in by_head]
    assert not missing, f"not in the source KB: {missing}"
    return list(films), by_head


def build(kb, rng):
    films, by_head = select_films(kb)
    triples = [list(t) for f in films for t in by_head[f]]
    # Drop tags that collide (after norm) with another entity: MetaQA tags repeat names
    # ("spike lee", "war") and those accidental collisions would muddy the planted ones.
    names = {norm(x) for h, r, t in triples for x in ((h, t) if r != "has_tags" else (h,))}
    surnames = {norm(t.split()[-1]) for h, r, t in triples if r in PEOPLE_RELS}
    keep_tags = {n.lower() for n in TAG_TRAPS}
    triples = [tr for tr in triples if tr[1] != "has_tags" or tr[2] in keep_tags
               or (norm(tr[2]) not in names and norm(tr[2]) not in surnames)]
    clusters: dict[str, str] = {}  # surface -> gold label
    kinds: Counter = Counter()
    planted: list[tuple[str, str, str]] = []  # (original, variant, kind)
    traps: list[tuple[str, str, str]] = []  # (surface a, surface b, what)

    # Traps first, so no duplicate is planted on them.
    for name, (side, surface) in TRAPS.items():
        other_rel = next(r for h, r, t in triples if t == name and r != "has_tags")
        role = ROLE[other_rel]
        for tr in triples:
            if tr[0] == name and side == "film":
                tr[0] = surface
            if tr[2] == name and tr[1] != "has_tags" and side == "other":
                tr[2] = surface
        film_s, other_s = (surface, name) if side == "film" else (name, surface)
        clusters[film_s], clusters[other_s] = f"{name} (film)", f"{name} ({role})"
        traps.append((film_s, other_s, f"film vs {role}"))
    for name in TAG_TRAPS:
        clusters[name], clusters[name.lower()] = f"{name} (film)", f"{name.lower()} (tag)"
        traps.append((name, name.lower(), "film vs tag"))
    reserved = set(clusters)

    # Mentions: where each surface occurs, as (triple index, position).
    def mentions(name, positions):
        return [(i, p) for i, tr in enumerate(triples) for p in positions if tr[p] == name
                and (p == 0 or tr[1] in PEOPLE_RELS)]

    all_norms = {norm(x) for tr in triples for x in (tr[0], tr[2])} | {norm(x) for tr in kb for x in (tr[0], tr[2])}
    extra_triples: list[list[str]] = []

    def plant(original, variants, positions):
        ms = mentions(original, positions)
        if len(ms) < len(variants) + 1:
            return False
        for variant, kind in variants:
            same_key = norm(variant) == norm(original)
            assert same_key == (kind == "case"), (original, variant)
            assert kind == "case" or norm(variant) not in all_norms, f"{variant!r} collides"
        rng.shuffle(ms)
        n_moved = max(len(variants), len(ms) // 2)  # about half the mentions move to the variant(s)
        for j, (i, p) in enumerate(ms[:n_moved]):
            triples[i][p] = variants[j % len(variants)][0]
        for variant, kind in variants:
            clusters[variant] = original
            kinds[kind] += 1
            planted.append((original, variant, kind))
            all_norms.add(norm(variant))
            # A third of the variants also restate one kept fact: extracted KGs repeat facts
            # under both surfaces, so the two share a neighbour (shared-neighbour blocking).
            if rng.random() < 1 / 3:
                i, p = ms[-1]
                copy = list(triples[i])
                copy[p] = variant
                extra_triples.append(copy)
        clusters[original] = original
        return True

    for title, (variant, kind) in FILMS.items():
        assert plant(title, [(variant, kind)], (0,)), f"too few triples for {title!r}"
    for person, variants in PEOPLE.items():
        assert plant(person, variants, (2,)), f"too few mentions for {person!r}"
    counts = Counter(tr[2] for tr in triples if tr[1] in PEOPLE_RELS)
    pool = sorted(p for p, c in counts.items() if c >= 2 and p not in clusters and p not in reserved)
    rng.shuffle(pool)
    for kind, want in GENERIC:
        done = 0
        while done < want and pool:
            person = pool.pop()
            variant = generic_variant(person, kind, rng)
            if variant and (kind == "case" or norm(variant) not in all_norms):
                done += plant(person, [(variant, kind)], (2,))
    # MetaQA's own spelling twins among tags ("super-hero"/"superhero") are true duplicates too.
    twins = defaultdict(set)
    for h, r, t in triples:
        if r == "has_tags" and t not in clusters:
            twins[re.sub(r"[\W_]+", "", norm(t))].add(t)
    for names in twins.values():
        first, *rest = sorted(names)
        for other in rest:
            clusters[first] = clusters[other] = first
            kinds["natural"] += 1
            planted.append((first, other, "natural"))
    seen = {tuple(t) for t in triples}
    extra_start = len(triples)
    for t in extra_triples:
        if tuple(t) not in seen:
            seen.add(tuple(t))
            triples.append(t)
    return triples, extra_start, clusters, planted, traps, kinds


RESTATE = {"directed_by": "{t} directed {h}.", "written_by": "{t} wrote {h}.", "starred_actors": "{t} appears in {h}.",
           "release_year": "{h} came out in {t}.", "in_language": "{h} is in {t}.",
           "has_genre": "{h} is a {t} film.", "has_tags": "{h} is tagged {t}."}


def render_chunks(triples, extra_start, trap_surfaces, rng):
    """One to three chunks per film surface (facts, cast, tags), then one per restated fact.

    Returns the chunk texts (ids are c0001, c0002, ... in this order) and triple index -> chunk id.
    """
    groups: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
    for i, (h, r, t) in enumerate(triples[:extra_start]):
        part = "cast" if r == "starred_actors" else "tags" if r.startswith("has_imdb") or r == "has_tags" else "facts"
        groups[h][part].append(i)
    trap_film = {a for a, _b, _w in trap_surfaces}
    trap_other = {b for _a, b, _w in trap_surfaces}

    def who(i):  # a trap actor is named with their role, as a text would to disambiguate
        r, t = triples[i][1], triples[i][2]
        return f"the actor {t}" if t in trap_other and r == "starred_actors" else t

    def listing(xs):
        return xs[0] if len(xs) == 1 else ", ".join(xs[:-1]) + " and " + xs[-1]

    texts: list[str] = []
    source: dict[int, str] = {}
    for head, parts in groups.items():
        title = f"the film {head}" if head in trap_film else head
        for part in ("facts", "cast", "tags"):
            idx = parts.get(part)
            if not idx:
                continue
            by_rel = defaultdict(list)
            for i in idx:
                by_rel[triples[i][1]].append(i)
            if part == "facts":
                year = [triples[i][2] for i in by_rel["release_year"]]
                genre = [triples[i][2] for i in by_rel["has_genre"]]
                lang = [triples[i][2] for i in by_rel["in_language"]]
                text = f"{head} is a {year[0] + ' ' if year else ''}"  # "is a … film" says what it is
                text += f"{'/'.join(genre) + ' ' if genre else ''}film"
                text += f" in the {listing(lang)} language{'s' if len(lang) > 1 else ''}" if lang else ""
                bits = [f"directed by {listing([who(i) for i in by_rel['directed_by']])}"] if by_rel["directed_by"] else []
                bits += [f"written by {listing([who(i) for i in by_rel['written_by']])}"] if by_rel["written_by"] else []
                text += (", " + " and ".join(bits) if bits else "") + "."
                if len(year) > 1:  # MetaQA merges remakes under one title, so years can repeat
                    text += f" Other releases under this title date from {listing(year[1:])}."
            elif part == "cast":
                cast = listing([who(i) for i in idx])
                text = rng.choice([f"{title[0].upper() + title[1:]} stars {cast}.",
                                   f"The cast of {title} includes {cast}."])
            else:
                tags = [triples[i][2] for i in by_rel["has_tags"]]
                text = f"Viewers tag {title} with: {', '.join(tags)}." if tags else f"{title[0].upper() + title[1:]}"
                for rel, what in (("has_imdb_rating", "an IMDb rating described as"), ("has_imdb_votes", "IMDb votes")):
                    if by_rel[rel]:
                        text += f"{' It' if tags else ''} has {what} {triples[by_rel[rel][0]][2]}."
            cid = f"c{len(texts) + 1:04d}"
            texts.append(text)
            for i in idx:
                source[i] = cid
    for i in range(extra_start, len(triples)):  # a restated fact is its own short sentence
        h, r, t = triples[i]
        texts.append(RESTATE.get(r, "{h} has {t}.").format(h=h, t=t))
        source[i] = f"c{len(texts):04d}"
    return texts, source


def verify(triples, gold, chunk_ids):
    """Every collision under ``norm`` is planned: a case duplicate (same label) or a trap (different labels)."""
    by_key = defaultdict(set)
    for name in gold:
        by_key[norm(name)].add(name)
    for names in by_key.values():
        labels = {gold[n] for n in names}
        assert len(names) == 1 or len(labels) == len(names) or len(labels) == 1, names
    assert all(c in chunk_ids for _h, _r, _t, cs in triples for c in cs)
    assert len({(h, r, t) for h, r, t, _ in triples}) == len(triples), "duplicate triple"
    for h, r, t, _ in triples:
        assert all(x == unicodedata.normalize("NFC", x) and x == x.strip() for x in (h, r, t)), (h, r, t)


def near_misses(gold):
    """Name pairs in different gold clusters that look alike (informational: sequels, namesakes)."""
    from rapidfuzz import fuzz, process

    names = sorted(gold)
    out = []
    for i, hits in enumerate(process.cdist(names, names, scorer=fuzz.ratio, score_cutoff=92, workers=1)):
        for j in hits.nonzero()[0]:
            if i < j and gold[names[i]] != gold[names[j]] and norm(names[i]) != norm(names[j]):
                out.append((names[i], names[int(j)]))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", type=Path, default=REPO.parent / "shared" / "data" / "metaqa-dev")
    ap.add_argument("--dest", type=Path, default=REPO / "sample_data" / "dedup")
    ap.add_argument("--seed", type=int, default=4)
    args = ap.parse_args(argv)
    rng = random.Random(args.seed)
    kb = load(args.source)
    triples, extra_start, clusters, planted, traps, kinds = build(kb, rng)
    texts, source = render_chunks(triples, extra_start, traps, rng)
    rows = [(h, r, t, [source[i]]) for i, (h, r, t) in enumerate(triples)]
    gold: dict[str, str] = {}
    for h, _r, t, _c in rows:
        for name in (h, t):
            gold.setdefault(name, clusters.get(name, name))
    chunk_ids = {f"c{i + 1:04d}" for i in range(len(texts))}
    verify(rows, gold, chunk_ids)

    args.dest.mkdir(parents=True, exist_ok=True)
    dump = lambda objs: "".join(json.dumps(o, ensure_ascii=False) + "\n" for o in objs)  # noqa: E731
    (args.dest / "kb.jsonl").write_text(dump({"triple": [h, r, t], "source_chunks": c} for h, r, t, c in rows),
                                        encoding="utf-8")
    (args.dest / "chunks.jsonl").write_text(
        dump({"chunk_id": f"c{i + 1:04d}", "text": x} for i, x in enumerate(texts)), encoding="utf-8")
    (args.dest / "gold_clusters.jsonl").write_text(dump({"entity": e, "cluster": c} for e, c in gold.items()),
                                                   encoding="utf-8")
    sizes = Counter(gold.values())
    stats = {
        "films": len({h for h, *_ in rows}), "triples": len(rows), "restated": len(rows) - extra_start,
        "entities": len(gold), "chunks": len(texts), "clusters": len(sizes),
        "variants": len(planted), "traps": len(traps),
        "relations": Counter(r for _h, r, _t, _c in rows),
    }
    stats["dup_clusters"] = len({clusters[v] for _o, v, _k in planted})
    stats["three"] = sum(1 for c in Counter(clusters[v] for _o, v, _k in planted).values() if c >= 2)
    misses = near_misses(gold)
    readme = make_readme(args, stats, kinds, planted, traps, misses)
    (args.dest / "README.md").write_text(readme, encoding="utf-8")
    print(readme.split("## Derivation")[0].strip())


def make_readme(args, st, kinds, planted, traps, misses) -> str:
    attribution = (args.source / "README.md").read_text(encoding="utf-8").split("\n\n")[1]
    kind_rows = "\n".join(f"| {k} | {n} | {', '.join(f'{o} → {v}' for o, v, kk in planted if kk == k)} |"
                          for k, n in sorted(kinds.items(), key=lambda kv: (-kv[1], kv[0])))
    trap_rows = "\n".join(f"| {a} | {b} | {w} |" for a, b, w in traps)
    rels = ", ".join(f"{r} {n}" for r, n in st["relations"].most_common())
    miss = "; ".join(f"{a} / {b}" for a, b in misses[:12]) or "none"
    return f"""# sample_data/dedup: a MetaQA KG with planted duplicates and same-name traps

A small KG for entity deduplication (docs/design.md §8): {st['films']} films of MetaQA's
movie KB with their triples, {st['variants']} duplicate surface forms in
{st['dup_clusters']} gold clusters, {st['traps']} same-name traps, and short English text chunks
that every triple cites as its source. Generated by
`python scripts/make_dedup_kg.py --source ../shared/data/metaqa-dev --seed {args.seed}` (deterministic).

| | count |
|---|---|
| triples | {st['triples']} (of which {st['restated']} restate a fact under a variant) |
| entities (distinct head/tail strings) | {st['entities']} |
| chunks | {st['chunks']} |
| gold clusters | {st['clusters']} |
| duplicate clusters (≥ 2 members) | {st['dup_clusters']} ({st['three']} with 3 members) |
| duplicate pairs (variant → original) | {st['variants']} ({kinds['natural']} of them MetaQA's own tag twins) |
| traps (same name after normalization, different entities) | {st['traps']} |

Relations: {rels}.

Planted variants by kind:

| kind | pairs | original → variant |
|---|---|---|
{kind_rows}

## Derivation

1. **Films.** From `../shared/data/metaqa-dev/kb.jsonl`: the curated films above, every trap
   film with up to 2 films on the other side of the trap, and for each curated person the
   {PEOPLE_FILMS} films with the most triples where they direct, write or act. All of a film's
   triples are kept, except `has_tags` triples whose tag equals (after normalization) another
   entity's name or a person's surname (MetaQA tags repeat names: "spike lee", "war"); those
   accidental collisions would blur the planted ones.
2. **Duplicates.** For each chosen entity (curated people and titles, plus {', '.join(f'{n} {k}' for k, n in GENERIC)}
   variants of people picked at random among those with ≥ 2 mentions), about half of the
   triples that mention it (as film head, or as director/writer/actor tail) are rewritten to
   use the variant, so both surfaces keep relations of their own. For about a third of the
   variants one kept fact is also restated under the variant (its own one-sentence chunk),
   as extraction from two documents would, so the pair shares a neighbour. MetaQA's own
   spelling twins among the kept tags (equal once punctuation is dropped: "super-hero" /
   "superhero") are labelled as duplicates too (kind `natural`).
3. **Traps.** MetaQA conflates a film with the person, genre or language of the same name
   into one node ("Malcolm X" written_by "Malcolm X"). We split them: since a node is its
   name string, one side gets a **case-only** variant ("MALCOLM X"), which survives NFC/NFKC
   and whitespace normalization but is equal under the exact-match normalization of docs/design.md §8
   (NFKC + casefold + whitespace collapse). Six more traps are MetaQA's own: a film and the
   lower-case topic tag of the same name ("Dracula" vs "dracula"). Each trap is an
   exact-match candidate whose two sides belong to **different** gold clusters: the judge
   must not merge on the name alone. Case-only variants also exist as true duplicates
   (kind `case`), so case alone decides nothing either way.
4. **Chunks.** For each film surface, up to three template sentences from its triples (facts:
   year, genre, language, director, writer; cast; tags and IMDb), each a chunk. A triple's
   `source_chunks` is the chunk it was written into, so a rewritten triple's chunk mentions
   the variant surface. Trap actors are named with their role ("stars the actor LEMMY") and
   trap films as "the film …" in cast and tag sentences.

| film side | other side | trap |
|---|---|---|
{trap_rows}

Gold labels: a planted cluster is labelled with its original name; trap sides are labelled
`<name> (film)` and `<name> (<role>)`; every other entity is a singleton labelled with its
own name. MetaQA itself merges remakes that share a title and namesakes that share a name;
those stay one entity here. Look-alike names in different clusters (sequels, namesakes,
informational): {miss}.

## Formats (JSON Lines)

- `kb.jsonl`: `{{"triple": [head, relation, tail], "source_chunks": ["c0001"]}}`
- `chunks.jsonl`: `{{"chunk_id": "c0001", "text": "..."}}`
- `gold_clusters.jsonl`: `{{"entity": "<surface exactly as in kb.jsonl>", "cluster": "<label>"}}`, one
  line for every head and tail.

## Attribution

Derived from MetaQA via `../shared/data/metaqa-dev`, whose README reads:

{attribution}

The planted variants, traps and text chunks are ours; this derivative is likewise CC BY 3.0.
"""


if __name__ == "__main__":
    main()
