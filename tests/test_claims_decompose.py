"""Claim decomposers (docs/design.md §6): rule, llm and hybrid, and the claims' source spans.

The LLM here is a scripted test double: it replies with canned JSON per text and records
what it was asked. It stands in for the model only where the logic under test (parsing,
span finding, which clauses hybrid sends) does not depend on what a model would say.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from workbench.claims.decompose import (
    CLAIMS_SCHEMA,
    DECOMPOSERS,
    claims_messages,
    decompose,
    hybrid_claims,
    llm_claims,
    parse_claims,
    rule_claims,
)
from workbench.claims.types import Claim


@dataclass
class Reply:
    text: str


class ScriptedLLM:
    """Replies ``replies[text]`` to a request to decompose ``text``; records every request."""

    def __init__(self, replies: dict[str, str] | None = None, default: str = '{"claims": []}'):
        self.replies = replies or {}
        self.default = default
        self.calls: list[dict] = []

    def ask(self, messages, *, max_tokens, schema=None, temperature=0.0):
        text = messages[-1]["content"]
        self.calls.append({"messages": list(messages), "max_tokens": max_tokens, "schema": schema})
        return Reply(self.replies.get(text, self.default))

    @property
    def asked(self) -> list[str]:
        """The texts the decomposer sent, in order."""
        return [c["messages"][-1]["content"] for c in self.calls]


def texts(claims: list[Claim]) -> list[str]:
    return [c.text for c in claims]


def sources(answer: str, claims: list[Claim]) -> list[str]:
    return [answer[c.start:c.end] for c in claims]


PY_ZH = "Python是一种高级编程语言，由Guido van Rossum创建，广泛用于数据科学和Web开发。"
PY_ZH_RELATIVE = "Python是一种由Guido van Rossum于1991年创建的高级编程语言，广泛用于数据科学和Web开发。"
COLD = "感冒的症状包括流鼻涕、咳嗽和发热。患者应该多喝水、休息，并在必要时服用退烧药。"
PY_EN = "Python was created by Guido van Rossum in 1991, and it is widely used for data science and web development."


# --------------------------------------------------------------------------- rule: required outputs


def test_rule_carries_the_subject_into_subjectless_clauses_and_expands_the_list():
    assert texts(rule_claims(PY_ZH)) == [
        "Python是一种高级编程语言", "Python由Guido van Rossum创建", "Python广泛用于数据科学", "Python广泛用于Web开发"]


def test_rule_leaves_a_relative_clause_whole_for_the_llm():
    assert texts(rule_claims(PY_ZH_RELATIVE)) == [
        "Python是一种由Guido van Rossum于1991年创建的高级编程语言", "Python广泛用于数据科学", "Python广泛用于Web开发"]


def test_rule_expands_enumerations_and_carries_the_subject_past_a_dropped_conjunction():
    assert texts(rule_claims(COLD)) == [
        "感冒的症状包括流鼻涕", "感冒的症状包括咳嗽", "感冒的症状包括发热",
        "患者应该多喝水", "患者应该休息", "患者在必要时服用退烧药"]


def test_rule_keeps_a_conditional_sentence_whole():
    """The conclusion "它易于学习" must not become a claim of its own: it holds only under its condition."""
    answer = "如果Python是高级语言，那么它易于学习。"
    claims = rule_claims(answer)
    assert texts(claims) == ["如果Python是高级语言，那么它易于学习"]
    assert (claims[0].start, claims[0].end) == (0, len(answer) - 1)


def test_rule_splits_english_at_comma_and_and_expands_the_for_list_leaving_the_pronoun():
    assert texts(rule_claims(PY_EN)) == [
        "Python was created by Guido van Rossum in 1991",
        "it is widely used for data science",
        "it is widely used for web development"]


@pytest.mark.parametrize("answer, expected", [
    ("Tom Hanks", ["Tom Hanks"]),
    ("42", ["42"]),             # shorter than min_chars, but it is the whole answer
    ("", []),
    ("  \n ", []),
])
def test_rule_keeps_a_bare_short_answer_as_one_claim(answer, expected):
    assert texts(rule_claims(answer)) == expected


def test_every_rule_claim_spans_the_clause_or_list_item_it_came_from():
    assert sources(PY_ZH, rule_claims(PY_ZH)) == [
        "Python是一种高级编程语言", "由Guido van Rossum创建", "数据科学", "Web开发"]
    assert sources(COLD, rule_claims(COLD)) == ["流鼻涕", "咳嗽", "发热", "多喝水", "休息", "在必要时服用退烧药"]
    assert sources(PY_EN, rule_claims(PY_EN)) == [
        "Python was created by Guido van Rossum in 1991", "data science", "web development"]
    assert all(c.source == "rule" for c in rule_claims(PY_EN))


# --------------------------------------------------------------------------- rule: the finer points


@pytest.mark.parametrize("answer, expected", [
    # "." ends a sentence only before whitespace or the end: versions and decimals survive.
    ("Python 3.12 was released in 2023. It added v1.2 support.",
     ["Python 3.12 was released in 2023", "It added v1.2 support"]),
    ("J. R. R. Tolkien wrote The Hobbit.", ["J. R. R. Tolkien wrote The Hobbit"]),   # initials
    ("The city has 1,000 residents.", ["The city has 1,000 residents"]),           # digit comma
    ("Python很流行！它简单吗？是的", ["Python很流行", "它简单吗"]),   # "是的" is under min_chars
])
def test_rule_sentence_and_clause_boundaries(answer, expected):
    assert texts(rule_claims(answer)) == expected


def test_rule_splits_lines_and_trims_list_bullets_from_the_spans():
    answer = "- Python是语言\n- 它由Guido创建\n1. Java也是语言"
    claims = rule_claims(answer)
    assert texts(claims) == ["Python是语言", "它由Guido创建", "Java也是语言"]
    assert sources(answer, claims) == texts(claims)


@pytest.mark.parametrize("answer, expected", [
    ("Apples, pears and plums are fruits.", ["Apples, pears and plums are fruits"]),
    ("The shop sells apples, pears, and plums.", ["The shop sells apples, pears, and plums"]),
    ("The Louvre is in Paris, France.", ["The Louvre is in Paris, France"]),
    ("In 1991, Guido released Python.", ["In 1991, Guido released Python"]),
    ("1991年，Guido发布了Python。", ["1991年，Guido发布了Python"]),
    ("在中国，Python很流行。", ["在中国，Python很流行"]),
    # Neither half of a disjunction is claimed, so ", or" / "，或" do not split either.
    ("Python is compiled, or it is interpreted.", ["Python is compiled, or it is interpreted"]),
    ("Python是编译型语言，或者是解释型语言。", ["Python是编译型语言，或者是解释型语言"]),
])
def test_rule_does_not_split_at_a_comma_that_joins_a_list_an_apposition_or_a_leading_phrase(answer, expected):
    assert texts(rule_claims(answer)) == expected


@pytest.mark.parametrize("answer, expected", [
    ("The shop sells apples, pears and plums, but it is closed on Sundays.",
     ["The shop sells apples, pears and plums", "but it is closed on Sundays"]),
    ("Lyon, France is old, whereas Paris, Texas is young.", ["Lyon, France is old", "whereas Paris, Texas is young"]),
    ("In 1991, Guido released Python, and it is still popular.", ["In 1991, Guido released Python", "it is still popular"]),
    # A Chinese comma ends a clause (Chinese lists use 、), unless it follows a leading time or place phrase.
    ("在家里，红烧肉的主料是五花肉，辅料包括生姜和冰糖。", ["在家里，红烧肉的主料是五花肉", "辅料包括生姜", "辅料包括冰糖"]),
    ("1991年，Guido发布了Python, 而且它很快流行。", ["1991年，Guido发布了Python", "它很快流行"]),
])
def test_rule_splits_a_sentence_only_at_the_comma_that_begins_a_clause(answer, expected):
    assert texts(rule_claims(answer)) == expected


def test_rule_does_not_expand_a_conjunction_without_a_list_word():
    assert texts(rule_claims("Tom and Jerry are friends.")) == ["Tom and Jerry are friends"]


def test_rule_does_not_expand_a_disjunction():
    assert texts(rule_claims("Python可以用于Web开发或数据科学。")) == ["Python可以用于Web开发或数据科学"]


def test_rule_keeps_an_english_comma_list_together_and_expands_it():
    answer = "Common cold symptoms include a runny nose, cough, and fever."
    claims = rule_claims(answer)
    assert texts(claims) == ["Common cold symptoms include a runny nose", "Common cold symptoms include cough",
                             "Common cold symptoms include fever"]
    assert sources(answer, claims) == ["a runny nose", "cough", "fever"]


def test_rule_treats_as_well_as_after_a_list_word_as_a_list():
    assert texts(rule_claims("Python is used for science as well as teaching.")) == [
        "Python is used for science", "Python is used for teaching"]


def test_rule_drops_a_trailing_deng_from_the_last_item():
    assert texts(rule_claims("症状包括咳嗽和发热等。")) == ["症状包括咳嗽", "症状包括发热"]


def test_rule_carries_an_english_subject_into_a_clause_that_opens_with_an_auxiliary():
    assert texts(rule_claims("Python was created by Guido van Rossum, and is widely used in teaching.")) == [
        "Python was created by Guido van Rossum", "Python is widely used in teaching"]


def test_rule_does_not_carry_the_subject_past_er_qie_which_brings_its_own_subject():
    assert texts(rule_claims("Python是语言，而且Java也是语言。")) == ["Python是语言", "Java也是语言"]


def test_rule_drops_a_clause_that_is_only_a_conjunction():
    assert texts(rule_claims("Also, Python is popular.")) == ["Python is popular"]


def test_rule_drops_short_fragments_and_exact_duplicates_in_order():
    assert texts(rule_claims("Python是语言，好。Python是语言。")) == ["Python是语言"]
    assert texts(rule_claims("Python是语言，好。", min_chars=1)) == ["Python是语言", "好"]


@given(st.text(alphabet=st.sampled_from(list("ab 1.,，。、和包括for and Python是\n")), max_size=60))
def test_rule_claims_are_never_empty_and_their_spans_lie_inside_the_answer(answer):
    for c in rule_claims(answer):
        assert c.text.strip() and 0 <= c.start < c.end <= len(answer)


# --------------------------------------------------------------------------- llm


def test_llm_makes_one_schema_constrained_call_and_locates_each_claim():
    answer = "Python由Guido van Rossum创建。它广泛用于数据科学。"
    llm = ScriptedLLM({answer: json.dumps({"claims": ["Python由Guido van Rossum创建", "Python广泛用于数据科学"]},
                                          ensure_ascii=False)})
    claims = llm_claims(answer, llm, max_tokens=99)
    assert llm.calls == [{"messages": claims_messages(answer), "max_tokens": 99, "schema": CLAIMS_SCHEMA}]
    assert [m["role"] for m in llm.calls[0]["messages"]] == ["system", "user"]
    assert claims == [Claim("Python由Guido van Rossum创建", 0, 25, "llm"), Claim("Python广泛用于数据科学", None, None, "llm")]


def test_llm_span_search_goes_forward_from_the_previous_claim_first():
    """"数据科学" occurs twice; after "Python用于" its next occurrence is the one meant."""
    answer = "数据科学很重要。Python用于数据科学。"
    llm = ScriptedLLM({answer: '{"claims": ["Python用于", "数据科学"]}'})
    assert [(c.start, c.end) for c in llm_claims(answer, llm)] == [(8, 16), (16, 20)]


def test_llm_span_falls_back_to_nfkc_and_case_insensitive_matching():
    answer = "ＰＹＴＨＯＮ由Guido创建。"
    llm = ScriptedLLM({answer: '{"claims": ["python由guido创建"]}'})
    claim, = llm_claims(answer, llm)
    assert (claim.text, answer[claim.start:claim.end]) == ("python由guido创建", "ＰＹＴＨＯＮ由Guido创建")


def test_llm_output_cut_off_by_max_tokens_keeps_the_complete_claims():
    cut = '{"claims": ["Python是一种编程语言", "Python由Guido创建", "Python于19'
    assert parse_claims(cut) == ["Python是一种编程语言", "Python由Guido创建"]
    answer = "Python是一种编程语言，由Guido创建。"
    assert texts(llm_claims(answer, ScriptedLLM({answer: cut}))) == ["Python是一种编程语言", "Python由Guido创建"]


@pytest.mark.parametrize("output, expected", [
    ('{"claims": [" A是B ", 3, null, "", "A是B", {"x": 1}, "C是D"]}', ["A是B", "C是D"]),  # strip, drop, dedup
    ('["A是B", "C是D"]', ["A是B", "C是D"]),                       # a bare list
    ('Here you go: {"claims": ["A是B", 7, "C是', ["A是B"]),        # prose before, cut off, non-string
    ('{"claims": "A是B"}', []),
    ('{"answers": ["A是B"]}', []),
    ("no JSON at all", []),
])
def test_parse_claims_keeps_only_complete_nonempty_strings(output, expected):
    assert parse_claims(output) == expected


def test_llm_falls_back_to_the_whole_answer_when_the_model_gives_nothing_usable():
    answer = "  Python很流行。 "
    claims = llm_claims(answer, ScriptedLLM(default="garbage"))
    assert claims == [Claim("Python很流行。", 2, 12, "llm")]


def test_llm_does_not_call_the_model_for_an_empty_answer():
    llm = ScriptedLLM()
    assert llm_claims("  ", llm) == [] and llm.calls == []


# --------------------------------------------------------------------------- hybrid


LONG = "Python是一种由Guido van Rossum于1991年创建的高级编程语言"     # 41 characters
LLM_SPLIT = {LONG: json.dumps({"claims": [
    "Python是一种编程语言", "Python是高级编程语言", "Guido van Rossum于1991年创建",
    "python是高级编程语言。",      # a near-duplicate of the second claim
    "Python广泛用于数据科学",      # also a later rule claim: the first one is kept
]}, ensure_ascii=False)}


def test_hybrid_sends_only_long_clauses_to_the_llm():
    llm = ScriptedLLM(LLM_SPLIT)
    hybrid_claims(PY_ZH_RELATIVE, llm)
    assert len(LONG) == 41 and llm.asked == [LONG]
    assert llm.calls[0]["schema"] == CLAIMS_SCHEMA


def test_hybrid_replaces_a_long_clause_by_the_llm_claims_and_dedups_in_order():
    claims = hybrid_claims(PY_ZH_RELATIVE, ScriptedLLM(LLM_SPLIT))
    assert texts(claims) == ["Python是一种编程语言", "Python是高级编程语言", "Guido van Rossum于1991年创建",
                             "Python广泛用于数据科学", "Python广泛用于Web开发"]
    assert [c.source for c in claims] == ["llm", "llm", "llm", "llm", "rule"]


def test_hybrid_llm_claims_get_their_own_span_inside_the_clause_or_inherit_the_clause_span():
    claims = hybrid_claims(PY_ZH_RELATIVE, ScriptedLLM(LLM_SPLIT))
    assert (claims[0].start, claims[0].end) == (0, len(LONG))            # not found: the clause's span
    assert sources(PY_ZH_RELATIVE, claims[2:3]) == ["Guido van Rossum于1991年创建"]  # found inside the clause
    assert (claims[3].start, claims[3].end) == (0, len(LONG))            # found only outside: still the clause


def test_hybrid_keeps_the_rule_claim_when_the_llm_gives_nothing_usable():
    llm = ScriptedLLM(default='{"claims": [')
    assert hybrid_claims(PY_ZH_RELATIVE, llm) == rule_claims(PY_ZH_RELATIVE)
    assert llm.asked == [LONG]


def test_hybrid_with_a_high_threshold_is_the_rule_decomposer():
    llm = ScriptedLLM(LLM_SPLIT)
    assert hybrid_claims(PY_ZH_RELATIVE, llm, long_clause=1000) == rule_claims(PY_ZH_RELATIVE)
    assert llm.calls == []


# --------------------------------------------------------------------------- decompose


def test_decompose_dispatches_by_method_and_passes_options_on():
    assert DECOMPOSERS == ("rule", "llm", "hybrid")
    assert decompose(PY_ZH, "rule") == rule_claims(PY_ZH)
    assert texts(decompose("Python是语言，好。", "rule", min_chars=1)) == ["Python是语言", "好"]
    assert decompose(PY_ZH_RELATIVE, "hybrid", ScriptedLLM(LLM_SPLIT), long_clause=1000) == rule_claims(PY_ZH_RELATIVE)
    answer = "A是B。"
    assert texts(decompose(answer, "llm", ScriptedLLM({answer: '{"claims": ["A是B"]}'}))) == ["A是B"]


@pytest.mark.parametrize("method, llm, message", [
    ("magic", None, "not one of rule, llm, hybrid"),
    ("llm", None, "needs an LLM"),
    ("hybrid", None, "needs an LLM"),
])
def test_decompose_rejects_an_unknown_method_or_a_missing_llm(method, llm, message):
    with pytest.raises(ValueError, match=message):
        decompose("A是B。", method, llm)


def test_llm_decomposes_a_long_answer_a_few_sentences_at_a_time():
    """A paragraph is asked in runs of whole sentences of up to ``window`` characters, each cached on its own;
    a run the model gives nothing for is kept whole, and spans point into the paragraph."""
    first, second, third = "The Nile flows north.", "It empties into the Mediterranean Sea.", "It is long."
    answer = f"{first} {second} {third}"
    llm = ScriptedLLM({f"{first} {second}": '{"claims": ["The Nile flows north", "The Nile empties into the sea"]}'})
    claims = llm_claims(answer, llm, window=60)
    assert llm.asked == [f"{first} {second}", third]
    assert texts(claims) == ["The Nile flows north", "The Nile empties into the sea", third]
    assert (claims[0].start, claims[0].end) == (0, 20) and claims[1].start is None
    assert answer[claims[2].start:claims[2].end] == third


def test_llm_asks_a_short_answer_whole():
    answer = "The Nile flows north. It empties into the Mediterranean Sea."
    llm = ScriptedLLM()
    assert texts(llm_claims(answer, llm)) == [answer]
    assert llm.asked == [answer]
