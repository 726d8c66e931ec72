"""Chain-of-Query (docs/design.md §7): the format, its forgiving parser, the prompts and feedback.

Each malformed case is a slip a small model makes; the expected :class:`Chain` is written
out in full so the test reads as the parser's specification.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from workbench.pipelines.coq import (
    CHAIN_MAX_TOKENS,
    Chain,
    ChainParseError,
    Step,
    coq_messages,
    feedback_message,
    parse_chain,
    render_chain,
)

Q1 = "Which film did Ridley Scott direct in 1982?"
Q2 = "Who wrote Blade Runner?"
FINAL = "Ridley Scott directed Blade Runner in 1982 [1]. Its writer is unknown [2]. So the answer is unknown."


def answered(n: int, query: str, answer: str) -> Step:
    return Step(n, query, answer, False)


def unsolved(n: int, query: str) -> Step:
    return Step(n, query, None, True)


def chain(*steps: Step, final: str | None = None, citations: tuple[int, ...] = ()) -> Chain:
    return Chain(tuple(steps), final, citations)


# --- well-formed chains ----------------------------------------------------------------

def test_a_fully_answered_chain_with_citations():
    text = (f"[Query 1]: {Q1}\n[Answer 1]: Blade Runner\n[Query 2]: {Q2}\n[Answer 2]: Hampton Fancher\n"
            "[Final Content]: Ridley Scott directed Blade Runner [1], written by Hampton Fancher [2]. "
            "So the answer is Hampton Fancher.")
    assert parse_chain(text) == chain(
        answered(1, Q1, "Blade Runner"), answered(2, Q2, "Hampton Fancher"),
        final="Ridley Scott directed Blade Runner [1], written by Hampton Fancher [2]. "
              "So the answer is Hampton Fancher.",
        citations=(1, 2))


def test_an_unsolved_step_marked_after_its_query():
    text = f"[Query 1]: {Q1}\n[Answer 1]: Blade Runner\n[Query 2]: {Q2}\n[Unsolved Query]\n[Final Content]: {FINAL}"
    assert parse_chain(text) == chain(answered(1, Q1, "Blade Runner"), unsolved(2, Q2), final=FINAL, citations=(1, 2))


def test_an_unsolved_step_in_the_papers_form_tags_the_query_itself():
    text = f"[Query 1]: {Q1}\n[Answer 1]: Blade Runner\n[Unsolved Query]: {Q2}\n[Final Content]: {FINAL}"
    assert parse_chain(text) == chain(answered(1, Q1, "Blade Runner"), unsolved(2, Q2), final=FINAL, citations=(1, 2))


def test_the_final_content_spans_lines_until_the_end():
    text = f"[Query 1]: {Q1}\n[Answer 1]: Blade Runner\n[Final Content]: It is Blade Runner [1].\n\nSo the answer is Blade Runner.\n"
    assert parse_chain(text) == chain(answered(1, Q1, "Blade Runner"),
                                      final="It is Blade Runner [1].\n\nSo the answer is Blade Runner.", citations=(1,))


def test_a_chain_without_final_content_has_final_none():
    assert parse_chain(f"[Query 1]: {Q1}\n[Answer 1]: Blade Runner") == chain(answered(1, Q1, "Blade Runner"))


@pytest.mark.parametrize("final, citations", [
    ("A [1]. B [2]. So the answer is C.", (1, 2)),
    ("B [2][1]. So the answer is C.", (2, 1)),          # order of first appearance
    ("A and B [1, 2]. Again [2]. So the answer is C.", (1, 2)),  # a list marker, deduplicated
    ("A [1;2]. So the answer is C.", (1, 2)),
    ("A [ 2 ]. So the answer is C.", (2,)),
    ("A [3]. B [0]. So the answer is C.", ()),          # only steps that exist
    ("A [Query 1]. So the answer is C.", ()),           # not a numeric marker
    ("No citations. So the answer is C.", ()),
])
def test_citation_markers_in_the_final_content(final, citations):
    text = f"[Query 1]: {Q1}\n[Answer 1]: Blade Runner\n[Query 2]: {Q2}\n[Unsolved Query]\n[Final Content]: {final}"
    assert parse_chain(text).citations == citations


# --- slips a small model makes ---------------------------------------------------------

STEPS_1_2 = chain(answered(1, Q1, "Blade Runner"), unsolved(2, Q2), final="So the answer is X [1].", citations=(1,))

MALFORMED = {
    "tags in any case": (
        f"[QUERY 1]: {Q1}\n[answer 1]: Blade Runner\n[query 2]: {Q2}\n[UNSOLVED QUERY]\n[final content]: So the answer is X [1].",
        STEPS_1_2),
    "no colon after the tag": (
        f"[Query 1] {Q1}\n[Answer 1] Blade Runner\n[Query 2] {Q2}\n[Unsolved Query]\n[Final Content] So the answer is X [1].",
        STEPS_1_2),
    "a dash after the tag": (
        f"[Query 1] - {Q1}\n[Answer 1] - Blade Runner\n[Query 2] - {Q2}\n[Unsolved Query]\n[Final Content] - So the answer is X [1].",
        STEPS_1_2),
    "spaces inside the brackets": (
        f"[ Query 1 ]: {Q1}\n[ Answer 1 ]: Blade Runner\n[ Query  2 ]: {Q2}\n[ Unsolved Query ]\n[ Final Content ]: So the answer is X [1].",
        STEPS_1_2),
    "markdown bold around the tags": (
        f"**[Query 1]:** {Q1}\n**[Answer 1]:** Blade Runner\n**[Query 2]**: {Q2}\n**[Unsolved Query]**\n"
        "**[Final Content]:** So the answer is X [1].",
        STEPS_1_2),
    "bold around the whole line and backticks": (
        f"**[Query 1]: {Q1}**\n`[Answer 1]`: Blade Runner\n*[Query 2]: {Q2}*\n`[Unsolved Query]`\n"
        "**[Final Content]: So the answer is X [1].**",
        STEPS_1_2),
    "bullets and list numbers": (
        f"- [Query 1]: {Q1}\n- [Answer 1]: Blade Runner\n2. [Query 2]: {Q2}\n* [Unsolved Query]\n[Final Content]: So the answer is X [1].",
        STEPS_1_2),
    "tags without brackets": (
        f"Query 1: {Q1}\nAnswer 1: Blade Runner\nQuery 2: {Q2}\nUnsolved Query:\nFinal Content: So the answer is X [1].",
        STEPS_1_2),
    "numbers missing": (
        f"[Query]: {Q1}\n[Answer]: Blade Runner\n[Query]: {Q2}\n[Unsolved Query]\n[Final Content]: So the answer is X [1].",
        STEPS_1_2),
    "numbers out of order are renumbered by appearance": (
        f"[Query 3]: {Q1}\n[Answer 3]: Blade Runner\n[Query 1]: {Q2}\n[Unsolved Query]\n[Final Content]: So the answer is X [1].",
        STEPS_1_2),
    "an answer number that matches no query goes to the open query before it": (
        f"[Query 1]: {Q1}\n[Answer 7]: Blade Runner\n[Query 2]: {Q2}\n[Final Content]: So the answer is X [1].",
        STEPS_1_2),
    "queries planned first, then numbered answers": (
        f"[Query 1]: {Q1}\n[Query 2]: {Q2}\n[Answer 1]: Blade Runner\n[Final Content]: So the answer is X [1].",
        STEPS_1_2),
    "an answer line before any query is ignored": (
        f"[Answer 1]: Deckard\n[Query 1]: {Q1}\n[Answer 1]: Blade Runner\n[Query 2]: {Q2}\n[Final Content]: So the answer is X [1].",
        STEPS_1_2),
    "a second answer to an answered step is ignored": (
        f"[Query 1]: {Q1}\n[Answer 1]: Blade Runner\n[Answer 1]: Alien\n[Query 2]: {Q2}\n[Final Content]: So the answer is X [1].",
        STEPS_1_2),
    "a query with no answer before the next query is unsolved": (
        f"[Query 1]: {Q1}\n[Answer 1]: Blade Runner\n[Query 2]: {Q2}\n[Final Content]: So the answer is X [1].",
        STEPS_1_2),
    "identical consecutive steps collapse": (
        f"[Query 1]: {Q1}\n[Answer 1]: Blade Runner\n[Query 2]: {Q1}\n[Answer 2]: Blade Runner\n"
        f"[Query 3]: {Q2}\n[Unsolved Query]\n[Query 4]: {Q2}\n[Unsolved Query]\n[Final Content]: So the answer is X [1].",
        STEPS_1_2),
    "a query repeated with the unsolved tag collapses": (
        f"[Query 1]: {Q1}\n[Answer 1]: Blade Runner\n[Query 2]: {Q2}\n[Unsolved Query]: {Q2}\n[Final Content]: So the answer is X [1].",
        STEPS_1_2),
    "text before the first tag and untagged lines are ignored": (
        f"Sure! Let me think step by step.\n\n[Query 1]: {Q1}\n[Answer 1]: Blade Runner\nThat was easy.\n"
        f"[Query 2]: {Q2}\n[Unsolved Query]\n[Final Content]: So the answer is X [1].",
        STEPS_1_2),
    "an echoed question line is skipped": (
        f"[Question]: Who wrote the 1982 film by Ridley Scott?\n[Query 1]: {Q1}\n[Answer 1]: Blade Runner\n"
        f"[Query 2]: {Q2}\n[Unsolved Query]\n[Final Content]: So the answer is X [1].",
        STEPS_1_2),
    "Final Content without brackets": (
        f"[Query 1]: {Q1}\n[Answer 1]: Blade Runner\n[Query 2]: {Q2}\nFinal Content: So the answer is X [1].",
        STEPS_1_2),
    "Final Answer instead of Final Content": (
        f"[Query 1]: {Q1}\n[Answer 1]: Blade Runner\n[Query 2]: {Q2}\n[Final Answer]: So the answer is X [1].",
        STEPS_1_2),
    "the final content ends at the next tag: a new imagined example is ignored": (
        f"[Query 1]: {Q1}\n[Answer 1]: Blade Runner\n[Query 2]: {Q2}\n[Final Content]: So the answer is X [1].\n"
        "[Question]: Who directed Heat?\n[Query 1]: Who directed Heat?\n[Answer 1]: Michael Mann",
        STEPS_1_2),
    "a trailing partial tag cut off by max_tokens is ignored": (
        f"[Query 1]: {Q1}\n[Answer 1]: Blade Runner\n[Query 2]: {Q2}\n[Unsolved Query]\n[Final Cont",
        chain(answered(1, Q1, "Blade Runner"), unsolved(2, Q2))),
    "an empty answer cut off by max_tokens leaves the step unsolved": (
        f"[Query 1]: {Q1}\n[Answer 1]: Blade Runner\n[Query 2]: {Q2}\n[Answer 2]:",
        chain(answered(1, Q1, "Blade Runner"), unsolved(2, Q2))),
    "full-width colon": (
        f"[Query 1]：{Q1}\n[Answer 1]：Blade Runner\n[Query 2]：{Q2}\n[Final Content]：So the answer is X [1].",
        STEPS_1_2),
    "Windows line endings": (
        f"[Query 1]: {Q1}\r\n[Answer 1]: Blade Runner\r\n[Query 2]: {Q2}\r\n[Unsolved Query]\r\n[Final Content]: So the answer is X [1].\r\n",
        STEPS_1_2),
}


@pytest.mark.parametrize("text, expected", MALFORMED.values(), ids=MALFORMED.keys())
def test_malformed_chains_parse_to_the_intended_chain(text, expected):
    assert parse_chain(text) == expected


@pytest.mark.parametrize("answer", ["Unknown", "unknown.", "I don't know", "I do not know", "N/A", "n/a", "",
                                    "  ", "**Unknown**", "[Unsolved Query]", "I don’t know."])
def test_an_answer_that_means_unknown_leaves_the_step_unsolved(answer):
    assert parse_chain(f"[Query 1]: {Q1}\n[Answer 1]: {answer}") == chain(unsolved(1, Q1))


def test_an_unknown_answer_closes_the_step():
    # the model gave up on step 1, so a later answer line cannot silently fill it
    text = f"[Query 1]: {Q1}\n[Answer 1]: unknown\n[Answer 1]: Blade Runner"
    assert parse_chain(text) == chain(unsolved(1, Q1))


def test_the_papers_unsolved_query_takes_an_answer_that_follows_it():
    # after a "complete" feedback the model may copy its form: the explicit answer wins
    text = f"[Unsolved Query]: {Q1}\n[Answer]: Blade Runner"
    assert parse_chain(text) == chain(answered(1, Q1, "Blade Runner"))


def test_a_bare_unsolved_marker_closes_the_nearest_open_query():
    text = f"[Query 1]: {Q1}\n[Query 2]: {Q2}\n[Answer 2]: Hampton Fancher\n[Unsolved Query]\n[Answer]: Alien"
    assert parse_chain(text) == chain(unsolved(1, Q1), answered(2, Q2, "Hampton Fancher"))


def test_steps_repeated_later_but_not_consecutively_are_kept():
    text = f"[Query 1]: {Q1}\n[Answer 1]: Blade Runner\n[Query 2]: {Q2}\n[Query 3]: {Q1}\n[Answer 3]: Blade Runner"
    assert parse_chain(text) == chain(answered(1, Q1, "Blade Runner"), unsolved(2, Q2), answered(3, Q1, "Blade Runner"))


def test_a_query_cut_off_mid_line_is_kept_for_the_caller_to_judge():
    text = f"[Query 1]: {Q1}\n[Answer 1]: Blade Runner\n[Query 2]: Who wro"
    assert parse_chain(text) == chain(answered(1, Q1, "Blade Runner"), unsolved(2, "Who wro"))


def test_an_empty_query_or_final_content_counts_as_absent():
    text = f"[Query 1]: {Q1}\n[Answer 1]: Blade Runner\n[Query 2]:\n[Final Content]:"
    assert parse_chain(text) == chain(answered(1, Q1, "Blade Runner"))


@pytest.mark.parametrize("line", ["Answer is Blade Runner.", "Queries like this are hard.", "Final thoughts on it."])
def test_prose_that_starts_with_a_tag_word_is_not_a_tag(line):
    assert parse_chain(f"[Query 1]: {Q1}\n{line}") == chain(unsolved(1, Q1))


# --- no chain at all -------------------------------------------------------------------

@pytest.mark.parametrize("text, why", [
    ("Blade Runner was written by Hampton Fancher and David Peoples.", "answered without a Chain-of-Query"),
    ("", "answered without a Chain-of-Query"),
    ("[Answer 1]: Blade Runner", "answered without a Chain-of-Query"),
    ("[Query 1]:\n[Answer 1]: Blade Runner", "answered without a Chain-of-Query"),
    ("[Final Content]: So the answer is Blade Runner.", "only a [Final Content]"),
])
def test_no_query_step_raises_chain_parse_error(text, why):
    with pytest.raises(ChainParseError, match=r"no \[Query\] step found") as info:
        parse_chain(text)
    assert why in str(info.value)
    assert isinstance(info.value, ValueError)


# --- render_chain ----------------------------------------------------------------------

def test_render_chain_writes_the_canonical_format():
    c = chain(answered(1, Q1, "Blade Runner"), unsolved(2, Q2), final=FINAL, citations=(1, 2))
    assert render_chain(c) == (f"[Query 1]: {Q1}\n[Answer 1]: Blade Runner\n[Query 2]: {Q2}\n[Unsolved Query]\n"
                               f"[Final Content]: {FINAL}")


@pytest.mark.parametrize("text", [text for text, _ in MALFORMED.values()])
def test_render_chain_round_trips(text):
    c = parse_chain(text)
    assert parse_chain(render_chain(c)) == c


# --- prompts ---------------------------------------------------------------------------

def test_coq_messages_end_with_the_question_as_the_user_turn():
    question = "Who composed the score of the film that won Best Picture in 1998?"
    messages = coq_messages(question)
    assert messages[0]["role"] == "system"
    assert messages[-1]["role"] == "user" and question in messages[-1]["content"]
    assert all(set(m) == {"role", "content"} for m in messages)
    assert [m["role"] for m in messages[1:-1]] == ["user", "assistant"] * 2


def test_the_few_shot_demonstrates_the_whole_format_and_parses():
    system, *turns, _ = coq_messages("Q?")
    for word in ("[Query n]", "[Answer n]", "[Unsolved Query]", "[Final Content]", "So the answer is"):
        assert word in system["content"]
    shots = [parse_chain(m["content"]) for m in turns if m["role"] == "assistant"]
    assert [s.unsolved for s in shots[0].steps] == [False, False]
    assert [s.unsolved for s in shots[1].steps] == [False, True]
    for shot in shots:
        assert shot.final.endswith(".") and "So the answer is" in shot.final and shot.citations == (1, 2)
    # the examples are written canonically: what the parser reads back renders to the same text
    assert [render_chain(s) for s in shots] == [m["content"] for m in turns if m["role"] == "assistant"]


def test_the_prompt_is_compact():
    # roughly 4 characters per token: well under ~450 tokens of SmolLM2's 2048-token context
    assert sum(len(m["content"]) for m in coq_messages("")) < 1600
    assert CHAIN_MAX_TOKENS == 200


# --- feedback --------------------------------------------------------------------------

def test_correct_feedback_quotes_the_step_then_asks_to_fix_and_continue():
    text = feedback_message("correct", Q2, "Hampton Fancher", "Blade Runner was written by Hampton Fancher.", "Q?")
    assert text.startswith(f"[Query]: {Q2}\n[Answer]: Hampton Fancher\n"
                           "[Reference]: Blade Runner was written by Hampton Fancher.\n")
    assert '"Q?"' in text and "[Final Content]" in text and "same format" in text


def test_complete_feedback_quotes_the_unsolved_step():
    text = feedback_message("complete", Q2, "Hampton Fancher", "Written by Hampton Fancher.", "Q?")
    assert text.startswith(f"[Unsolved Query]: {Q2}\n[Answer]: Hampton Fancher\n[Reference]: Written by Hampton Fancher.\n")
    assert '"Q?"' in text and "[Final Content]" in text


def test_feedback_of_another_kind_is_a_value_error():
    with pytest.raises(ValueError, match="unknown feedback kind 'verify'"):
        feedback_message("verify", Q2, "a", "r", "Q?")


# --- properties ------------------------------------------------------------------------

FRAGMENTS = ["[Query 1]: ", "[Answer 1]: ", "[Unsolved Query]", "[Unsolved Query]: ", "[Final Content]: ", "Query: ",
             "**", "`", "[", "]", ":", " - ", "\n", "\r\n", " ", "[1]", "[1, 2]", "unknown", "Blade Runner", "?",
             "Final Answer:", "Question: ", "2", "_", "\u2028"]
chain_texts = st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=8)), max_size=30).map("".join)


@settings(max_examples=300)
@given(chain_texts)
def test_parse_chain_raises_only_chain_parse_error(text):
    try:
        parse_chain(text)
    except ChainParseError:
        pass


@settings(max_examples=300)
@given(chain_texts)
def test_a_parsed_chain_is_well_formed_and_survives_a_round_trip(text):
    try:
        c = parse_chain(text)
    except ChainParseError:
        return
    assert [s.n for s in c.steps] == list(range(1, len(c.steps) + 1))
    assert all(s.unsolved == (s.answer is None) and s.query for s in c.steps)
    assert all(1 <= n <= len(c.steps) for n in c.citations) and len(set(c.citations)) == len(c.citations)
    assert parse_chain(render_chain(c)) == c
