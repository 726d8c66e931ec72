"""Candidate generation for entity deduplication (workbench.kg.candidates, docs/design.md §8).

Every expected number here can be checked by hand: fuzzy scores are rapidfuzz's
token_sort_ratio, i.e. 1 - (insertions + deletions) / (len(a) + len(b)) on the
normalized, token-sorted names; "Steven Spielberg" vs "Steven Speilberg" is one
transposition = 1 deletion + 1 insertion over 32 characters → 1 - 2/32 = 0.9375.
"""

from __future__ import annotations

import numpy as np
import pytest
from rapidfuzz import fuzz

from workbench.kg.candidates import (
    INITIALS_SCORE,
    Candidate,
    CandidateConfig,
    gold_pairs_from_clusters,
    generate_candidates,
    initials,
    normalize_name,
    pairs_completeness,
)


def found(names, neighbours=None, **kwargs) -> dict[tuple[int, int], Candidate]:
    """The candidates of ``names`` keyed by (a, b)."""
    candidates, _ = generate_candidates(names, neighbours, **kwargs)
    return {(c.a, c.b): c for c in candidates}


# -- normalize_name ----------------------------------------------------------------

@pytest.mark.parametrize("raw, expected", [
    ("Stanley Kubrick", "stanley kubrick"),
    ("  STANLEY   kubrick\t", "stanley kubrick"),          # case, whitespace
    ("Kubrick, Stanley", "kubrick stanley"),                # punctuation → space
    ("Spider-Man: Far_From/Home (2019)", "spider man far from home 2019"),
    ("ＵＮ", "un"),                                          # full-width → NFKC
    ("U.N.", "un"),                                         # dotted initials join ...
    ("UN", "un"),
    ("J. R. R. Tolkien", "jrr tolkien"),                    # ... with or without spaces
    ("J.R.R. Tolkien", "jrr tolkien"),
    ("S. Spielberg", "s spielberg"),                        # a lone initial stays a token
    ("Pokémon", "pokemon"),                                 # Latin accents stripped
    ("Zoë Saldaña", "zoe saldana"),
    ("Straße", "strasse"),                                  # casefold, not lower
    ("Tom & Jerry", "tom and jerry"),                       # "&" → "and"
    ("Schindler’s List", "schindlers list"),                # apostrophes deleted
    ("Schindler's List", "schindlers list"),
    ("が", "が"),                                            # no dakuten stripping
    ("...", ""),
])
def test_normalize_name(raw, expected):
    assert normalize_name(raw) == expected


def test_and_and_ampersand_normalize_alike():
    assert normalize_name("Tom & Jerry") == normalize_name("Tom and Jerry")


# -- initials ----------------------------------------------------------------------

@pytest.mark.parametrize("raw, expected", [
    ("United Nations", "un"),
    ("Stanley Kubrick", "sk"),
    ("S. Kubrick", "sk"),
    ("Bank of America", "ba"),                              # stopwords skipped
    ("The Lord of the Rings", "lr"),
    ("National Aeronautics and Space Administration", "nasa"),
    ("UN", "un"),                                           # single all-caps token: itself
    ("NASA", "nasa"),
    ("ＵＮ", "un"),
    ("U.N.", "un"),
    ("J. R. R. Tolkien", "jrrt"),                           # each dotted initial counts
    ("Madonna", "m"),
    ("The The", "tt"),                                      # only stopwords: keep them
    ("", ""),
])
def test_initials(raw, expected):
    assert initials(raw) == expected


# -- the sources of candidates -------------------------------------------------------

def test_exact_matches_are_all_pairs_of_a_normalized_group():
    got = found(["Stanley Kubrick", "STANLEY KUBRICK", "Kubrick", "stanley  kubrick"])
    assert set(got) == {(0, 1), (0, 3), (1, 3)}
    assert all(c.reasons == ("exact",) and c.score == 1.0 for c in got.values())


def test_fuzzy_pair_within_a_first_token_block():
    got = found(["Steven Spielberg", "Steven Speilberg", "Stanley Kubrick"])
    assert list(got) == [(0, 1)]
    assert got[(0, 1)].reasons == ("fuzzy",)
    assert got[(0, 1)].score == pytest.approx(1 - 2 / 32)


def test_reordered_tokens_share_the_sorted_token_block():
    got = found(["Stanley Kubrick", "Kubrick, Stanley"])
    assert got[(0, 1)].reasons == ("fuzzy",) and got[(0, 1)].score == 1.0


def test_acronym_pairs_come_from_the_initials_key():
    got = found(["UN", "United Nations", "U.N.", "NASA", "National Aeronautics and Space Administration"])
    assert got[(0, 2)].reasons == ("exact",)
    assert got[(0, 1)].reasons == ("initials",) and got[(0, 1)].score == INITIALS_SCORE
    assert got[(1, 2)].reasons == ("initials",)
    assert got[(3, 4)].reasons == ("initials",)
    assert set(got) == {(0, 1), (0, 2), (1, 2), (3, 4)}
    # Only a name written as an acronym (all caps, dotted) is taken for initials.
    assert set(found(["Ray", "Robert A. Young"])) == set()
    assert set(found(["RAY", "Robert A. Young"])) == {(0, 1)}
    # Without the initials rule the edit ratio ("un" vs "united nations" = 0.25) says no.
    assert set(found(["UN", "United Nations"], config=CandidateConfig(use_initials=False))) == set()


def test_fuzzy_scores_ignore_stopwords_and_numbers_must_agree():
    # With stopwords "the sun and the father" / "the sun and the heat" would be 0.857;
    # without, "sun father" / "sun heat" is 1 - 6/18 = 0.667. "the matrix" / "matrix" is 1.0.
    # "rocky 2" / "rocky 3" is 0.857 ≥ 0.85, but unequal numbers (sequels, years) veto it.
    assert fuzz.token_sort_ratio("the sun and the father", "the sun and the heat") / 100 >= 0.85
    assert fuzz.token_sort_ratio("rocky 2", "rocky 3") / 100 >= 0.85
    got = found(["The Sun and the Father", "The Sun and the Heat", "The Matrix", "Matrix, The",
                 "Rocky 2", "Rocky 3"])
    assert list(got) == [(2, 3)] and got[(2, 3)].score == 1.0


def test_an_initialled_first_name_is_an_initials_pair():
    # "s spielberg" vs token-sorted "spielberg steven" has a poor edit ratio, but the
    # tokens line up: "s" is the initial of "steven" and "spielberg" is equal.
    names = ["S. Spielberg", "Steven Spielberg", "J. R. R. Tolkien", "John Ronald Reuel Tolkien",
             "S. Kubrick", "Steven Soderbergh"]
    got = found(names)
    assert set(got) == {(0, 1), (2, 3)}
    assert got[(0, 1)].reasons == ("initials",) and got[(0, 1)].score == INITIALS_SCORE
    assert got[(2, 3)].reasons == ("initials",)


def test_similar_names_in_no_common_block_are_not_proposed():
    # Similar enough (0.909 ≥ 0.85), but no block key is shared: first tokens "aaron" /
    # "baron", sorted tokens differ, initials "as" / "bs". So nothing compares them:
    # the generator never falls back to all pairs.
    assert fuzz.token_sort_ratio("aaron smith", "baron smith") / 100 >= 0.85
    candidates, stats = generate_candidates(["Aaron Smith", "Baron Smith"])
    assert candidates == [] and stats["comparisons"] == 0


def test_shared_neighbours_propose_a_pair_and_a_hub_is_no_key():
    names = ["Orson Welles", "Citizen Kane Director", "Akira Kurosawa", "Fritz Lang", "Leni Riefenstahl"]
    neighbours = [
        {10, 11, 12, 99},           # 99 is a hub: linked to entities 0–3 (degree 4 > 3)
        {10, 11, 99},
        {12, 99},
        {99},
        {10, 11, 14, 15, 16, 17},   # shares 10, 11 with 0 and 1, but Jaccard 2/8 and 2/7
    ]
    config = CandidateConfig(max_neighbour_degree=3)
    candidates, stats = generate_candidates(names, neighbours, config=config)
    # (0, 1): shared {10, 11} ≥ 2; Jaccard over full sets |{10, 11, 99}| / |{10, 11, 12, 99}|.
    assert [(c.a, c.b, c.reasons) for c in candidates] == [(0, 1, ("neighbours",))]
    assert candidates[0].score == pytest.approx(3 / 4)
    assert stats["hub_neighbours"] == 1
    # (0, 2) share 12 and the hub 99: with the hub as a key they reach 2 shared, J = 2/4.
    with_hub = found(names, neighbours, config=CandidateConfig(max_neighbour_degree=10))
    assert with_hub[(0, 2)].score == pytest.approx(2 / 4)


def test_reasons_merge_and_score_is_the_best():
    got = found(["Steven Spielberg", "Steven Speilberg"], [{10, 11}, {10, 11}])
    assert got[(0, 1)].reasons == ("fuzzy", "neighbours")
    assert got[(0, 1)].score == 1.0                          # Jaccard 1.0 beats 0.9375


def test_embedding_knn_on_hand_vectors():
    names = ["alpha", "bravo", "charlie", "delta", "echo"]
    vectors = np.array([
        [1, 0, 0],
        [10, 1, 0],   # cos with row 0: 10 / sqrt(101) = 0.995
        [0, 1, 0],
        [0, 2, 0],    # not normalized on input: cos with row 2 is 1.0
        [0, 0, 1],    # orthogonal to all: its top neighbour has cos 0 < 0.9
    ], dtype=float)
    candidates, stats = generate_candidates(names, embeddings=vectors, config=CandidateConfig(embedding_k=1))
    assert [(c.a, c.b, c.reasons) for c in candidates] == [(0, 1, ("embedding",)), (2, 3, ("embedding",))]
    assert candidates[0].score == pytest.approx(10 / np.sqrt(101), abs=1e-6)
    assert candidates[1].score == pytest.approx(1.0)
    assert stats["by_reason"]["embedding"] == 2
    with pytest.raises(ValueError):
        generate_candidates(names, embeddings=vectors[:3])


def test_embedding_keeps_only_the_top_k_above_the_threshold():
    # Unit vectors at 0°, 10° and 22°: cos 0–1 = cos 10° = 0.985, cos 1–2 = cos 12° = 0.978,
    # cos 0–2 = cos 22° = 0.927. With k = 1, entity 0's best is 1, 1's is 0, 2's is 1, so
    # (0, 2) is not proposed although 0.927 ≥ 0.9; with k = 2 it is.
    angles = np.radians([0, 10, 22])
    vectors = np.column_stack([np.cos(angles), np.sin(angles)])
    names = ["alpha", "bravo", "charlie"]
    top1 = found(names, embeddings=vectors, config=CandidateConfig(embedding_k=1))
    assert set(top1) == {(0, 1), (1, 2)}
    assert top1[(1, 2)].score == pytest.approx(np.cos(np.radians(12)), abs=1e-6)
    top2 = found(names, embeddings=vectors, config=CandidateConfig(embedding_k=2))
    assert top2[(0, 2)].score == pytest.approx(np.cos(np.radians(22)), abs=1e-6)


# -- oversized blocks ----------------------------------------------------------------

def test_an_oversized_block_is_split_by_a_second_key():
    # Block "john" has 5 names > 3: split by the first letter of the other tokens,
    # "s" = {smith, smyth}, "b" = {brown, browne, black}; both fit.
    names = ["John Smith", "John Smyth", "John Brown", "John Browne", "John Black"]
    candidates, stats = generate_candidates(names, config=CandidateConfig(max_block=3))
    assert [(c.a, c.b) for c in candidates] == [(0, 1), (2, 3)]
    assert candidates[0].score == pytest.approx(1 - 2 / 20)
    assert candidates[1].score == pytest.approx(1 - 1 / 21)
    assert stats["oversized_blocks"] == 1 and stats["skipped_blocks"] == 0


def test_a_block_that_cannot_be_split_is_skipped_and_counted():
    # All three share "john" and the prefix "smit". Block "john" splits by the other
    # tokens into sub-block "smit" (3 > 2); block "js" by all tokens into "john" and
    # "smit" (3 each). Those 3 sub-blocks are skipped — at the price of the pairs in them.
    names = ["John Smith", "John Smithe", "John Smithy"]
    candidates, stats = generate_candidates(names, config=CandidateConfig(max_block=2))
    assert candidates == []
    assert stats["oversized_blocks"] == 2 and stats["skipped_blocks"] == 3


def test_an_oversized_exact_group_becomes_a_star():
    candidates, stats = generate_candidates(["Paris"] * 4, config=CandidateConfig(max_block=2))
    assert [(c.a, c.b) for c in candidates] == [(0, 1), (0, 2), (0, 3)]
    assert stats["oversized_blocks"] == 1


# -- evaluation of the blocking ------------------------------------------------------

def test_gold_pairs_from_clusters():
    assert gold_pairs_from_clusters(["a", "a", None, "b", "a", "b"]) == {(0, 1), (0, 4), (1, 4), (3, 5)}
    assert gold_pairs_from_clusters([None, None]) == set()


def test_completeness_and_reduction_on_six_entities():
    names = ["Stanley Kubrick", "stanley kubrick", "Steven Spielberg", "Steven Speilberg",
             "Orson Welles", "G. O. Welles"]
    gold = gold_pairs_from_clusters(["kubrick", "kubrick", "spielberg", "spielberg", "welles", "welles"])
    candidates, stats = generate_candidates(names)
    # "G. O. Welles" (George Orson) shares no block with "Orson Welles": first tokens "go"
    # / "orson", initials "gow" / "ow", and 3 vs 2 content tokens. So that pair is missed.
    assert [(c.a, c.b, c.reasons) for c in candidates] == [(0, 1, ("exact",)), (2, 3, ("fuzzy",))]
    assert pairs_completeness(candidates, gold) == pytest.approx(2 / 3)
    assert stats["all_pairs"] == 15 and stats["candidate_pairs"] == 2
    assert stats["reduction_ratio"] == pytest.approx(1 - 2 / 15)
    assert stats["by_reason"] == {"exact": 1, "fuzzy": 1, "initials": 0, "neighbours": 0, "embedding": 0}


def test_degenerate_inputs():
    assert pairs_completeness([], set()) is None
    assert pairs_completeness([], {(1, 0)}) == 0.0
    candidates, stats = generate_candidates(["Only One"])
    assert candidates == [] and stats["reduction_ratio"] is None and stats["all_pairs"] == 0
    with pytest.raises(ValueError):
        generate_candidates(["a", "b"], [{1}])
