"""Claim verification: verifiers (lexical, embedding, llm_judge, nli) and the vote (docs/design.md §6)."""

from __future__ import annotations

import numpy as np
import pytest

from workbench.claims.types import Claim, Verdict
from workbench.claims.verify import (JUDGE_SCHEMA, VERIFIERS, EmbeddingVerifier, LexicalVerifier, LLMJudgeVerifier,
                                     NLIVerifier, VerifierUnavailable, lexical_score, lexical_tokens,
                                     make_verifiers, nli_messages, parse_judgement, NLI_OPTIONS)
from workbench.claims.vote import TIES, ClaimResult, judge_claim, summarize, vote
from workbench.models.base import ModelError
from workbench.models.cached import default_llm
from workbench.models.embedder import CachedEmbedder
from workbench.models.embedders import E5
from workbench.models.locate import default_model_path

from conftest import ScriptedLLM

COLD = "感冒的常见症状包括流鼻涕、咳嗽、发热和喉咙痛。"


def V(supported: bool, score: float | None = None, verifier: str = "lexical") -> Verdict:
    """A verdict; the score defaults to 1.0 / 0.0."""
    return Verdict(verifier, supported, (1.0 if supported else 0.0) if score is None else score)


def claim(text: str) -> Claim:
    return Claim(text, None, None)             # span-less: verification never looks at spans


# ---------------------------------------------------------------- vote

@pytest.mark.parametrize("ties, expected", [("unsupported", False), ("supported", True)])
def test_vote_one_verifier_is_its_verdict_two_split_go_to_the_tie_policy(ties, expected):
    assert (vote([V(True)], ties), vote([V(False)], ties)) == (True, False)
    assert vote([V(True), V(False)], ties) is expected
    assert vote([V(True), V(True)], ties) is True          # agreement is not a tie
    assert vote([V(False), V(False)], ties) is False


@pytest.mark.parametrize("ties", TIES)
def test_vote_three_verifiers_is_a_strict_majority_whatever_the_tie_policy(ties):
    assert vote([V(True), V(True), V(False)], ties) is True
    assert vote([V(True), V(False), V(False)], ties) is False


def test_vote_rejects_no_verdicts_and_unknown_tie_policy():
    with pytest.raises(ValueError, match="at least one"):
        vote([])
    with pytest.raises(ValueError, match="tie policy 'maybe'"):
        vote([V(True)], "maybe")


# ---------------------------------------------------------------- judge_claim (attribution)

def test_attribution_is_the_supported_unit_with_the_highest_mean_score():
    # Three units, two verifiers. Unit 0: both support, mean 0.7. Unit 1: only one supports
    # (a split, unsupported under the default policy) although its mean is highest, 0.9.
    # Unit 2: both support, mean 0.8 → the attribution.
    verdicts = {"lexical": [V(True, 0.6), V(True, 1.0), V(True, 0.8)],
                "embedding": [V(True, 0.8, "embedding"), V(False, 0.8, "embedding"), V(True, 0.8, "embedding")]}
    result = judge_claim(claim("c"), verdicts)
    assert result.supported is True
    assert result.unit_votes == [True, False, True]
    assert result.best_unit == 2
    assert result.best_score == pytest.approx(0.8)
    assert result.verdicts == verdicts                 # each verifier's own verdicts are kept
    # Under the "supported" tie policy unit 1 votes yes, and its mean 0.9 wins.
    assert judge_claim(claim("c"), verdicts, ties="supported").best_unit == 1


def test_attribution_ties_go_to_the_earlier_unit():
    verdicts = {"lexical": [V(False, 0.9), V(True, 0.75), V(True, 0.75)]}
    result = judge_claim(claim("c"), verdicts)
    assert (result.best_unit, result.best_score) == (1, 0.75)


def test_unsupported_claim_has_no_attribution():
    result = judge_claim(claim("c"), {"lexical": [V(False, 0.5), V(False, 0.2)]})
    assert (result.supported, result.best_unit, result.best_score) == (False, None, None)
    assert result.unit_votes == [False, False]


def test_no_units_means_unsupported():
    result = judge_claim(claim("c"), {"lexical": [], "embedding": []})
    assert (result.supported, result.best_unit, result.unit_votes) == (False, None, [])


def test_judge_claim_rejects_ragged_or_empty_verdicts():
    with pytest.raises(ValueError, match="different numbers of units"):
        judge_claim(claim("c"), {"lexical": [V(True)], "embedding": []})
    with pytest.raises(ValueError, match="at least one verifier"):
        judge_claim(claim("c"), {})


# ---------------------------------------------------------------- summarize

def results(*pairs: tuple[str, bool]) -> list[ClaimResult]:
    return [judge_claim(claim(text), {"lexical": [V(ok)]}) for text, ok in pairs]


def test_summarize_worked_example_six_claims_four_supported():
    answer = "红烧肉要先焯水。再炒糖色。加生抽。加老抽。小火炖一小时。最后撒葱花。"
    rs = results(("红烧肉要先焯水。", True), ("再炒糖色", True), ("加生抽", False),
                 ("加老抽", True), ("小火炖一小时", False), ("最后撒葱花", True))
    out = summarize(answer, rs)
    assert out.support_ratio == pytest.approx(4 / 6)          # 0.667
    assert [c.text for c in out.unsupported] == ["加生抽", "小火炖一小时"]
    assert out.rejected is False
    # CJK answer → "；" joiner; the trailing "。" of the first claim is dropped before joining.
    assert out.filtered_answer == "红烧肉要先焯水；再炒糖色；加老抽；最后撒葱花"
    assert out.claims == rs

    rejected = summarize(answer, rs, reject_below=0.7)         # 0.667 < 0.7
    assert (rejected.rejected, rejected.filtered_answer) == (True, None)
    assert rejected.support_ratio == pytest.approx(4 / 6)
    assert len(rejected.unsupported) == 2


def test_summarize_english_joiner_and_explicit_joiner():
    rs = results(("Tom Hanks starred in Forrest Gump.", True), ("It won six Oscars", True), ("It flopped", False))
    answer = "Tom Hanks starred in Forrest Gump. It won six Oscars, but it flopped."
    assert summarize(answer, rs).filtered_answer == "Tom Hanks starred in Forrest Gump; It won six Oscars"
    explicit = summarize(answer, rs, joiner=" | ").filtered_answer
    assert explicit == "Tom Hanks starred in Forrest Gump | It won six Oscars"


def test_summarize_no_claims_is_neither_supported_nor_rejected():
    out = summarize("", [])
    assert (out.support_ratio, out.rejected, out.filtered_answer, out.unsupported) == (None, False, None, [])


def test_summarize_threshold_is_inclusive():
    rs = results(("A", True), ("B", False))
    assert summarize("A. B.", rs, reject_below=0.5).rejected is False     # 0.5 is not below 0.5
    assert summarize("A. B.", rs, reject_below=0.51).rejected is True


# ---------------------------------------------------------------- lexical

def test_lexical_chinese_claim_covered_by_unit():
    # Claim bigrams (10 characters → 9): 感冒 冒的 的症 症状 状包 包括 括流 流鼻 鼻涕.
    # The unit reads "感冒的常见症状…", so 的症 is missing: it has 8 of the 9. 8/9 ≈ 0.889 ≥ 0.6.
    assert len(lexical_tokens("感冒的症状包括流鼻涕")) == 9
    [verdict] = LexicalVerifier().verify("感冒的症状包括流鼻涕", [COLD])
    assert verdict == Verdict("lexical", True, pytest.approx(8 / 9))


def test_lexical_chinese_claim_not_in_unit():
    # 患者 者应 应该 该多 多喝 喝水: none occurs in the unit.
    [verdict] = LexicalVerifier().verify("患者应该多喝水", [COLD])
    assert (verdict.supported, verdict.score) == (False, 0.0)


def test_lexical_punctuation_breaks_bigrams():
    # "、" separates 流鼻涕 and 咳嗽, so "涕咳" is no token of the unit.
    assert "涕咳" not in lexical_tokens(COLD)
    assert lexical_score("鼻涕咳嗽", COLD) == pytest.approx(2 / 3)     # 鼻涕, 咳嗽 of 鼻涕 涕咳 咳嗽


def test_lexical_metaqa_triple():
    unit = "Forrest Gump | starred_actors | Tom Hanks"
    assert lexical_tokens(unit) == {"forrest", "gump", "starred", "actors", "tom", "hanks"}
    [verdict] = LexicalVerifier().verify("Tom Hanks", [unit])
    assert (verdict.supported, verdict.score) == (True, 1.0)
    # Stopwords do not count: {tom, hanks, starred, forrest, gump} are all in the unit.
    assert lexical_score("Tom Hanks starred in the Forrest Gump", unit) == 1.0
    # Coverage of the claim, not of the unit: {tom, hanks, forrest, gump} of {tom, hanks, directed, forrest, gump}.
    assert lexical_score("Tom Hanks directed Forrest Gump", unit) == pytest.approx(4 / 5)


def test_lexical_threshold_and_empty_claim():
    unit = "Forrest Gump | directed_by | Robert Zemeckis"
    # {forrest, gump, starred, tom, hanks} ∩ unit = {forrest, gump}: 2/5 = 0.4.
    assert [v.supported for v in LexicalVerifier(0.4).verify("Tom Hanks starred Forrest Gump", [unit])] == [True]
    assert [v.supported for v in LexicalVerifier(0.41).verify("Tom Hanks starred Forrest Gump", [unit])] == [False]
    assert LexicalVerifier().verify("。。。 the of", [unit]) == [Verdict("lexical", False, 0.0)]
    assert LexicalVerifier().verify("anything", []) == []


# ---------------------------------------------------------------- llm_judge



def test_llm_judge_one_call_per_unit_with_the_schema_and_the_texts():
    llm = ScriptedLLM('{"verdict": "supported"}', '{"verdict":"unsupported"}', "I think so")
    units = ["Forrest Gump | starred_actors | Tom Hanks", "Forrest Gump | directed_by | Robert Zemeckis", "x"]
    judge = LLMJudgeVerifier(llm)
    verdicts = judge.verify("Tom Hanks starred in Forrest Gump", units, question="who starred in Forrest Gump")
    assert verdicts == [Verdict("llm_judge", True, 1.0), Verdict("llm_judge", False, 0.0),
                        Verdict("llm_judge", False, 0.0)]       # unparseable → unsupported, score 0
    assert judge.unparsed == 1
    assert len(llm.calls) == 3
    for call, unit in zip(llm.calls, units):
        assert call["schema"] is JUDGE_SCHEMA and call["max_tokens"] == 12
        prompt = "\n".join(m["content"] for m in call["messages"])
        assert "Tom Hanks starred in Forrest Gump" in prompt and unit in prompt
        assert "Background question (not evidence): who starred in Forrest Gump" in prompt
    llm = ScriptedLLM("supported")
    LLMJudgeVerifier(llm).verify("c", ["u"])                  # no question: no background line
    assert "Background question" not in llm.calls[0]["messages"][-1]["content"]


@pytest.mark.parametrize("text, expected", [
    ('{"verdict": "supported"}', True),
    ('{"verdict": "unsupported"}', False),
    ('  {"verdict" : "Supported"}\n', True),
    ('Answer: {"verdict": "unsupported"} because', False),      # fragment inside chatter
    ("supported", True),
    ("Unsupported.", False),
    ('{"verdict": "maybe"}', None),
    ('{"verdict": "unsupp', None),                                # cut off by max_tokens
    ("", None),
    ("the claim is supported", None),                             # no guessing from prose
])
def test_parse_judgement(text, expected):
    assert parse_judgement(text) is expected


# ---------------------------------------------------------------- nli and make_verifiers

class ChoosingLLM:
    """A test double of ``CachedLLM.choose`` (the verifier's logic, not the model): a scripted label per pair."""

    def __init__(self, labels: dict[tuple[str, str], str]):
        self.labels, self.asked = labels, []

    def choose(self, messages, options):
        premise, hypothesis = messages[-1]["content"].removeprefix("Premise: ").split("\n\nHypothesis: ")
        self.asked.append(premise)
        reply = ScriptedLLM.Reply(self.labels[(premise, hypothesis)])
        # The scripted label at 0.7, the other two sharing the rest.
        reply.probabilities = tuple(0.7 if o == reply.text else 0.15 for o in options)
        return reply


def test_nli_gives_three_way_verdicts_and_checks_premise_by_premise():
    llm = ChoosingLLM({("u1", "a"): "Entailment", ("u1", "b"): "Contradiction",
                       ("u2", "a"): "Neutral", ("u2", "b"): "Entailment"})
    nli = NLIVerifier(llm)
    pairs = [("a", "u1"), ("a", "u2"), ("b", "u1"), ("b", "u2")]       # claim-major, as a run lists them
    verdicts = nli.verify_pairs(pairs)
    assert [v.label for v in verdicts] == ["E", "N", "C", "E"]
    assert [v.supported for v in verdicts] == [True, False, False, True]
    assert [v.score for v in verdicts] == [0.7] * 4          # the probability of the label chosen
    # Premise-major: each premise's checks follow one another, so its KV prefix is reused.
    assert llm.asked == ["u1", "u1", "u2", "u2"]
    assert [v.label for v in nli.verify("a", ["u2", "u1"])] == ["N", "E"]


def test_a_two_way_verdict_is_entailment_or_neutral_and_a_label_must_agree():
    assert (Verdict("lexical", True, 0.9).label, Verdict("lexical", False, 0.1).label) == ("E", "N")
    with pytest.raises(ValueError, match="label 'C' with supported=True"):
        Verdict("nli", True, 1.0, "C")


@pytest.mark.real_model
def test_nli_with_the_real_model_chooses_one_label_in_one_pass_and_reuses_the_premise(store):
    """What holds on every CPU: one of the three labels per pair (which one is the CPU's), a second
    check of the same premise evaluates only its hypothesis, and a rerun is served from the cache."""
    llm = default_llm(store, n_ctx=1024)
    try:
        nli = NLIVerifier(llm)
        premise = "[T1] Kismet | directed_by | William Dieterle"
        first = nli.check(premise, "William Dieterle directed Kismet.")
        full, evaluated = llm.prompt_tokens, llm.eval_tokens
        assert first.label in ("E", "N", "C") and full == evaluated > 20
        nli.check(premise, "Kismet was directed by Steven Spielberg in 1999.")
        second_prompt, second_eval = llm.prompt_tokens - full, llm.eval_tokens - evaluated
        assert second_eval < second_prompt / 2            # the system text and the premise were not evaluated again
        assert (llm.model_calls, llm.cache_hits) == (2, 0)
        again = nli.check(premise, "William Dieterle directed Kismet.")
        assert again == first and (llm.model_calls, llm.cache_hits) == (2, 1)
    finally:
        llm.close()


@pytest.mark.real_model
def test_a_one_pass_choice_is_what_greedy_generation_under_the_labels_grammar_writes(store):
    """On any CPU: the label read from one forward pass equals the one the model generates, greedily, under a
    grammar admitting only the three labels (both read the same logits; the choice takes the best token that
    can begin each label, as the grammar's first step does)."""
    grammar = "root ::= " + " | ".join(f'"{o}"' for o in NLI_OPTIONS)
    pairs = [("[T1] Kismet | directed_by | William Dieterle", "William Dieterle directed Kismet."),
             ("[T1] Kismet | directed_by | William Dieterle", "Kismet was released in 1999."),
             ("准备两锅水：A 锅维持 100°C 沸水，B 锅维持 30°C 温水。", "重复转移操作共 10 次"),
             ("The Nile flows into the Mediterranean Sea.", "The Nile flows into the Red Sea.")]
    llm = default_llm(store, n_ctx=1024)
    try:
        for premise, hypothesis in pairs:
            chosen = llm.choose(nli_messages(premise, hypothesis), NLI_OPTIONS).text
            written = llm.ask(nli_messages(premise, hypothesis), max_tokens=8, grammar=grammar).text
            assert written == chosen, (premise, hypothesis)
    finally:
        llm.close()


def test_make_verifiers_builds_in_order():
    llm = ScriptedLLM()
    vs = make_verifiers(["llm_judge", "lexical"], llm=llm, lexical_threshold=0.5)
    assert [v.name for v in vs] == ["llm_judge", "lexical"]
    assert vs[0].llm is llm and vs[1].threshold == 0.5
    assert VERIFIERS == ("lexical", "embedding", "llm_judge", "nli")


@pytest.mark.parametrize("names, kwargs, error, pattern", [
    (["lexical", "bleu"], {}, ValueError, r"unknown verifier 'bleu'; choose from lexical, embedding, llm_judge, nli"),
    ([], {}, ValueError, "no verifiers requested"),
    (["lexical", "lexical"], {}, ValueError, "'lexical' is listed more than once"),
    (["embedding"], {}, VerifierUnavailable, "^embedding: no embedding model given$"),
    (["llm_judge"], {}, VerifierUnavailable, "^llm_judge: no LLM given$"),
    (["lexical", "nli"], {}, VerifierUnavailable, "^nli: no LLM given$"),
])
def test_make_verifiers_errors(names, kwargs, error, pattern):
    with pytest.raises(error, match=pattern):
        make_verifiers(names, **kwargs)
    assert issubclass(VerifierUnavailable, ValueError)    # one except clause catches both at the CLI


# ---------------------------------------------------------------- embedding (real model)

@pytest.mark.real_model
def test_embedding_verifier_with_the_shipped_model_needs_no_flag(store):
    embedder = CachedEmbedder(store)                                   # multilingual-e5-small, converted once
    verifier = make_verifiers(["embedding"], embedder=embedder, embedding_threshold=E5.claims)[0]
    assert isinstance(verifier, EmbeddingVerifier) and verifier.threshold == E5.claims
    text = "Tom Hanks starred in Forrest Gump"
    units = [text, "红烧肉要先焯水"]
    same, other = verifier.verify(text, units)
    assert same.verifier == "embedding"
    assert same.score == pytest.approx(1.0, abs=1e-5) and same.supported
    assert 0.0 <= other.score < same.score
    # The claim and both units were embedded once; a second claim over the same units embeds only itself.
    assert embedder.embedded == 2
    verifier.verify("Forrest Gump", units)
    assert embedder.embedded == 3
    embedder.close()
    # Kept in the store: another verifier over the same texts loads no model at all.
    again = CachedEmbedder(store)
    make_verifiers(["embedding"], embedder=again)[0].verify("Forrest Gump", units)
    assert again.embedded == 0 and again._embedder is None


def test_embedding_verifier_missing_or_unfit_model(store, tmp_path):
    with pytest.raises(ModelError, match="nope.gguf"):
        CachedEmbedder(store, str(tmp_path / "nope.gguf"))
    with pytest.raises(ModelError, match="not an embedding model"):
        CachedEmbedder(store, str(default_model_path()))             # a chat model


class _TableEmbedder:
    """Fixed unit vectors by text (the verifier's logic, not a model's): a text not in the table is orthogonal."""

    def __init__(self, table: dict[str, list[float]]):
        self.table = {k: np.array(v, dtype=np.float32) / np.linalg.norm(v) for k, v in table.items()}
        self.asked: list[str] = []

    def vectors(self, texts):
        self.asked += list(texts)
        return np.stack([self.table.get(t, np.array([0.0, 0.0, 1.0], dtype=np.float32)) for t in texts])


def test_a_long_premise_supports_a_claim_through_its_best_sentence():
    """A claim that one sentence of a paragraph states is supported: the paragraph's own vector dilutes it."""
    paragraph = "Water boils at 100 degrees. Salt raises the boiling point a little."
    embedder = _TableEmbedder({"It boils at 100 degrees.": [1, 0, 0], paragraph: [0.5, 0.5, 0.7],
                               "Water boils at 100 degrees": [0.95, 0.05, 0]})
    (verdict,) = EmbeddingVerifier(embedder, threshold=0.8).verify("It boils at 100 degrees.", [paragraph])
    assert verdict.supported and verdict.score == pytest.approx(0.95 / np.linalg.norm([0.95, 0.05, 0]), abs=1e-6)
    assert "Salt raises the boiling point a little" in embedder.asked


def test_a_one_sentence_premise_is_compared_whole():
    embedder = _TableEmbedder({"a claim": [1, 0, 0], "one line of evidence": [0.6, 0.8, 0]})
    (verdict,) = EmbeddingVerifier(embedder, threshold=0.75).verify("a claim", ["one line of evidence"])
    assert not verdict.supported and verdict.score == pytest.approx(0.6, abs=1e-6)
    assert embedder.asked == ["a claim", "one line of evidence"]
