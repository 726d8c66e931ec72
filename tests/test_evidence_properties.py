"""Properties of evidence rendering, templates and truncation (hypothesis).

The invariants the ledger relies on: parse() reads back exactly what was
rendered, every template is a permutation, and a token budget shows precisely
the lines that fit.
"""

from __future__ import annotations

from collections import Counter

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from workbench.evidence import (
    Unit,
    get_tokenizer,
    linearize,
    normalize_text,
    order_units,
    parse,
    render_line,
    truncate,
    truncate_many,
)

TOK = get_tokenizer()

# Field text: arbitrary Unicode, plus a dense mix of the characters that could
# break the line format (pipes, brackets, fake labels, every kind of line break).
tricky = st.text(
    alphabet=st.sampled_from(list("[]|TC0123 \n\r\t\x0b\x0c\x85\u2028\u2029中文字命运ab")), max_size=20
)
field = st.one_of(st.text(max_size=20), tricky)
uids = st.lists(st.integers(0, 10**6), unique=True, min_size=0, max_size=12)


@st.composite
def triples(draw, min_size=0):
    ids = draw(st.lists(st.integers(0, 10**6), unique=True, min_size=min_size, max_size=12))
    return [Unit(i, "triple", draw(field), draw(field), draw(field)) for i in ids]


@st.composite
def chunks(draw):
    ids = draw(uids)
    docs = st.one_of(st.none(), st.sampled_from(["a", "b", "c"]))
    return [Unit(i, "chunk", doc_id=draw(docs), text=draw(field)) for i in ids]


@st.composite
def small_graphs(draw):
    """Triples over a handful of entities, so chains, forks and cycles are common."""
    ents = st.sampled_from(["A", "B", "C", "D", "E", "F"])
    n = draw(st.integers(0, 10))
    return [Unit(i, "triple", draw(ents), "r", draw(ents)) for i in range(n)]


any_units = st.one_of(triples(), chunks(), st.builds(lambda a, b: a + b, triples(), chunks()))
fmts = st.sampled_from(["score", "linear", "struct"])


# Building Hypothesis' Unicode tables makes the first draw slow, and the real
# tokenizer is not instant: neither is a bug, so no health check or deadline.
relaxed = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _multiset(units):
    return Counter((u.kind, u.uid) for u in units)


@relaxed
@given(triples())
def test_parse_reads_back_every_rendered_triple_in_order(units):
    assert parse(linearize(units, "score")) == [u.label for u in units]


@relaxed
@given(chunks())
def test_parse_reads_back_every_rendered_chunk_in_order(units):
    assert parse(linearize(units, "score")) == [u.label for u in units]


@relaxed
@given(triples(min_size=1) | chunks())
def test_render_line_never_contains_a_line_break(units):
    for u in units:
        line = render_line(u)
        assert len(line.splitlines()) == 1
        assert line.startswith(f"[{u.label}] ")


@relaxed
@given(any_units, fmts, st.text(max_size=8))
def test_every_template_is_a_permutation(units, fmt, seed):
    ordered = order_units(units, fmt, seed=seed)
    assert _multiset(ordered) == _multiset(units)
    assert sorted(parse(linearize(units, fmt, seed=seed))) == sorted(u.label for u in units)


@relaxed
@given(small_graphs())
def test_struct_is_a_permutation_on_dense_graphs_with_cycles(units):
    assert sorted(u.uid for u in order_units(units, "struct")) == list(range(len(units)))


@relaxed
@given(any_units, st.integers(), st.randoms(use_true_random=False))
def test_linear_depends_only_on_seed_and_the_set_of_units(units, seed, rnd):
    reordered = list(units)
    rnd.shuffle(reordered)
    assert order_units(reordered, "linear", seed=seed) == order_units(units, "linear", seed=seed)


def test_linear_differs_across_seeds():
    units = [Unit(i, "triple", f"h{i}", "r", f"t{i}") for i in range(8)]
    orders = {tuple(u.uid for u in order_units(units, "linear", seed=f"0:s:{m}")) for m in range(5)}
    assert len(orders) == 5


@relaxed
@given(triples(), st.integers(0, 10**6), st.data())
def test_struct_keeps_a_two_hop_chain_contiguous_and_head_first(noise, base, data):
    # A fresh chain X -r-> Y -s-> Z inserted anywhere among unrelated triples.
    x, y, z = "⟨x⟩", "⟨y⟩", "⟨z⟩"
    hop1 = Unit(base + 2_000_001, "triple", x, "r", y)
    hop2 = Unit(base + 2_000_002, "triple", y, "s", z)
    noise = [u for u in noise if {normalize_text(u.head), normalize_text(u.tail)}.isdisjoint({x, y, z})]
    units = list(noise)
    first = data.draw(st.sampled_from([hop1, hop2]))
    second = hop2 if first is hop1 else hop1
    units.insert(data.draw(st.integers(0, len(units))), first)
    units.insert(data.draw(st.integers(0, len(units))), second)
    ordered = order_units(units, "struct")
    i = ordered.index(hop1)
    assert ordered[i + 1] == hop2


@settings(relaxed, max_examples=60)
@given(triples(min_size=1) | chunks())
def test_budget_at_each_line_boundary_shows_exactly_the_lines_that_fit(units):
    if not units:
        return
    lines = [render_line(u) + "\n" for u in units]
    text = "".join(lines)
    labels = [u.label for u in units]
    total = len(TOK.encode(text))
    for j in range(1, len(lines) + 1):
        n = len(TOK.encode("".join(lines[:j])))
        w = truncate(text, n, TOK)
        assert w.visible == tuple(labels[:j])
        assert w.truncated is (n < total)
        assert truncate(text, n - 1, TOK).visible == tuple(labels[: j - 1])


@settings(relaxed, max_examples=60)
@given(any_units, st.lists(st.integers(0, 400), max_size=4))
def test_windows_are_prefixes_without_replacement_chars_and_match_truncate(units, budgets):
    text = linearize(units, "score")
    windows = truncate_many(text, budgets, TOK)
    assert windows == [truncate(text, b, TOK) for b in budgets]
    for b, w in zip(budgets, windows):
        assert text.startswith(w.text)
        assert "\ufffd" not in w.text or "\ufffd" in text
        assert w.visible == tuple(parse(w.text))
        assert w.tokens == min(b, w.total_tokens)
        assert w.truncated is (w.total_tokens > b)
