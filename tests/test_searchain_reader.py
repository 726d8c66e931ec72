"""SearChain readers (docs/design.md §7): what each reader answers, with which confidence, and when a
reader's answer counts as agreeing with the model's.

Extractive confidence is ``0.5 * mention + 0.5 * relation``: mention is 1 when the query names
a side of the triple, relation is 1 when the query names the relation (a synonym phrase, or
all the relation's word stems). The expected numbers below are worked out by hand.
"""

from __future__ import annotations

import pytest

from workbench.evidence.units import Unit
from workbench.pipelines.reader import (READER_SCHEMA, READERS, RELATION_SYNONYMS, ExtractiveReader, LLMReader,
                                        Reading, answer_agrees, make_reader, parse_reading, relation_score, stem)

from conftest import ScriptedLLM


def triple(h: str, r: str, t: str) -> Unit:
    return Unit(1, "triple", head=h, relation=r, tail=t)


def chunk(text: str) -> Unit:
    return Unit(2, "chunk", doc_id="d", text=text)


READER = ExtractiveReader()

# ---------------------------------------------------------------- triples, every MetaQA relation

# (unit, query naming the head → tail, query naming the tail → head); all confidences 1.0:
# one side named (mention 1) and the relation named (relation 1).
METAQA = [
    (("Kismet", "directed_by", "William Dieterle"),
     "Who directed Kismet?", "Which films did William Dieterle direct?"),
    # "write" is no synonym: the relation scores 1 through stems ("written" → write → "writ").
    (("Kismet", "written_by", "Edward Knoblock"),
     "Who wrote Kismet?", "What films did Edward Knoblock write?"),
    (("Kismet", "starred_actors", "Marlene Dietrich"),
     "Who acted in Kismet?", "What movies did Marlene Dietrich star in?"),
    (("Kismet", "release_year", "1944"),
     "What year was Kismet released?", "Which movies were released in 1944?"),
    (("Kismet", "in_language", "English"),
     "What language is Kismet in?", "Which movies are in the English language?"),
    (("Kismet", "has_genre", "Drama"),
     "What genre is Kismet?", "Which movies have the genre Drama?"),
    (("Kismet", "has_tags", "marlene dietrich"),
     "What words describe Kismet?", "Which movies are about Marlene Dietrich?"),
    (("Kismet", "has_imdb_rating", "Good"),
     "How is Kismet rated?", "Which movies have a Good rating?"),
    (("Kismet", "has_imdb_votes", "Famous"),
     "How popular was Kismet?", "Which films have Famous votes?"),
]


@pytest.mark.parametrize("spo, head_query, tail_query", METAQA, ids=[m[0][1] for m in METAQA])
def test_extractive_answers_the_side_the_query_does_not_name(spo, head_query, tail_query):
    h, r, t = spo
    assert READER.read(head_query, triple(h, r, t)) == Reading(t, 1.0)
    assert READER.read(tail_query, triple(h, r, t)) == Reading(h, 1.0)


def test_every_metaqa_relation_has_synonyms():
    assert set(RELATION_SYNONYMS) == {m[0][1] for m in METAQA}


@pytest.mark.parametrize("query, spo, expected", [
    # Head named, relation not named: mention 1, relation 0 → 0.5 (the retriever's unit is off-topic).
    ("Who directed Kismet?", ("Kismet", "starred_actors", "Marlene Dietrich"), Reading("Marlene Dietrich", 0.5)),
    # Neither side named: answer the tail, mention 0; relation 1 → 0.5.
    ("Who directed Casablanca?", ("Kismet", "directed_by", "William Dieterle"), Reading("William Dieterle", 0.5)),
    # Neither side nor relation named → 0.0.
    ("What is the capital of France?", ("Kismet", "directed_by", "William Dieterle"),
     Reading("William Dieterle", 0.0)),
    # Both sides named: the query checks the fact → tail, mention 1.
    ("Did William Dieterle direct Kismet?", ("Kismet", "directed_by", "William Dieterle"),
     Reading("William Dieterle", 1.0)),
    # Tail named, relation words absent: "Which movies are in English?" has no "language" → 0.5.
    ("Which movies are in English?", ("Kismet", "in_language", "English"), Reading("Kismet", 0.5)),
    # A relation outside MetaQA scores by stems: {produc, company}, the query has "produced" → 1/2;
    # confidence 0.5 * 1 + 0.5 * 0.5.
    ("Who produced Kismet?", ("Kismet", "produced_by_company", "MGM"), Reading("MGM", 0.75)),
    ("Which company produced Kismet?", ("Kismet", "produced_by_company", "MGM"), Reading("MGM", 1.0)),
    # Latin names match whole words: the one-letter title "M" is not inside "kismet".
    ("Who directed Kismet?", ("M", "directed_by", "Fritz Lang"), Reading("Fritz Lang", 0.5)),
    ("Who directed M?", ("M", "directed_by", "Fritz Lang"), Reading("Fritz Lang", 1.0)),
    # Case, punctuation and articles do not matter for naming; the answer keeps the unit's spelling.
    ("who DIRECTED kismet", ("The Kismet!", "directed_by", "William Dieterle"), Reading("William Dieterle", 1.0)),
    # Chinese: names and relation words match as substrings (no spaces to split on).
    ("红烧肉的主料是什么", ("红烧肉", "主料", "五花肉"), Reading("五花肉", 1.0)),
    ("五花肉是哪道菜的主料", ("红烧肉", "主料", "五花肉"), Reading("红烧肉", 1.0)),
    ("红烧肉怎么做", ("红烧肉", "主料", "五花肉"), Reading("五花肉", 0.5)),
    # Nothing to answer with: an empty side gives an empty reading.
    ("Who directed Kismet?", ("Kismet", "directed_by", ""), Reading("", 0.0)),
])
def test_extractive_triple_cases(query, spo, expected):
    assert READER.read(query, triple(*spo)) == expected


def test_stems_and_relation_scores():
    assert [stem(w) for w in ("directed", "director", "directors", "directing")] == ["direct"] * 4
    assert {stem(w) for w in ("starred", "starring", "stars", "actor", "actress", "acted")} == {"star"}
    assert {stem(w) for w in ("wrote", "written", "writer", "writes")} == {"writ"}
    assert {stem(w) for w in ("release", "released", "year")} == {"releas"}
    assert {stem(w) for w in ("genre", "genres", "type", "kind")} == {"genr"}
    assert {stem(w) for w in ("tags", "tagged")} == {"tag"}
    assert relation_score("starred_actors", "who acted in it") == 1.0
    assert relation_score("in_language", "what is spoken in it") == 1.0
    assert relation_score("", "anything") == 0.0
    assert relation_score("by_the", "anything") == 0.0          # only fillers: nothing to match


# ---------------------------------------------------------------- chunks

def test_extractive_chunk_picks_the_best_sentence_chinese():
    unit = chunk("红烧肉的主料是五花肉。需要冰糖和生抽。")
    # Query bigrams: 红烧 烧肉 肉的 的主 主料 料是 是什 什么 (8); the first sentence shares the
    # first six → 6/8.
    assert READER.read("红烧肉的主料是什么", unit) == Reading("红烧肉的主料是五花肉。", 0.75)
    # 需要 要什 什么 么调 调料 (5); only 需要 is in the second sentence → 1/5.
    assert READER.read("需要什么调料", unit) == Reading("需要冰糖和生抽。", 0.2)
    assert READER.read("宫保鸡丁", unit) == Reading("", 0.0)          # no shared term


def test_extractive_chunk_english():
    unit = chunk("Kismet is a 1944 film. Its IMDb rating is 6.5 out of 10.\nIt stars Marlene Dietrich")
    # English stopwords are not query terms: {imdb, rating}, both in the second sentence; the
    # decimal point of 6.5 does not end a sentence.
    assert READER.read("What is the IMDb rating?", unit) == Reading("Its IMDb rating is 6.5 out of 10.", 1.0)
    # {who, stars, kismet} minus stopwords = {stars, kismet}: one each in sentences 1 and 3 → the earlier.
    assert READER.read("Who stars in Kismet?", unit) == Reading("Kismet is a 1944 film.", 0.5)
    assert READER.read("ＩＭＤｂ", unit).answer.startswith("Its IMDb")       # NFKC on both sides


def test_extractive_chunk_answer_is_trimmed_to_200_characters():
    reading = READER.read("Kismet?", chunk("Kismet " + "word " * 100))
    assert reading.confidence == 1.0 and len(reading.answer) == 200 and reading.answer.startswith("Kismet word")


# ---------------------------------------------------------------- agreement

@pytest.mark.parametrize("model, reader, agrees", [
    ("William Dieterle", "William Dieterle", True),
    ("It was directed by William Dieterle.", "william dieterle", True),   # containment, case
    ("The film is Kismet!", "Kismet", True),                              # punctuation, articles
    ("Marlene Dietrich, Jon Hall", "Jon Hall", True),
    ("Jon Hall | Marlene Dietrich", "Marlene Dietrich Jon Hall", True),   # token subset, other order
    ("红烧肉的主料是五花肉", "五花肉。", True),
    ("William Dieterle", "Fritz Lang", False),
    ("William Dieterle", "William Wyler", False),                         # one token shared is not enough
    ("五花肉", "五花肉和冰糖", False),
    ("", "Kismet", False),
    (None, "Kismet", False),                                              # unsolved step
    ("anything", "", True),                                               # nothing to contradict
    (None, "", True),
    ("anything", "...", True),                                            # normalizes to ""
])
def test_answer_agrees(model, reader, agrees):
    assert answer_agrees(model, reader) is agrees


# ---------------------------------------------------------------- LLM reader



def test_llm_reader_one_call_with_the_evidence_the_query_and_the_schema():
    llm = ScriptedLLM('{"answer": "William Dieterle", "confidence": 0.9}', '{"answer": "五花肉", "confidence": 1}')
    reader = LLMReader(llm)
    assert reader.read("Who directed Kismet?", Unit(17, "triple", head="Kismet", relation="directed_by",
                                                    tail="William\nDieterle")) == Reading("William Dieterle", 0.9)
    assert reader.read("红烧肉的主料是什么", chunk("红烧肉的主料是五花肉。\n需要冰糖。")) == Reading("五花肉", 1.0)
    assert len(llm.calls) == 2
    first, second = llm.calls
    assert first["schema"] is READER_SCHEMA and first["max_tokens"] == 32
    assert [m["role"] for m in first["messages"]] == ["system", "user"]
    user = first["messages"][1]["content"]
    # The unit as one line without its [T17] label, then the query.
    assert "Evidence: Kismet | directed_by | William Dieterle\n" in user and "[T17]" not in user
    assert "Question: Who directed Kismet?" in user
    assert "evidence only" in user and "confidence between 0 and 1" in user
    assert "Evidence: 红烧肉的主料是五花肉。 需要冰糖。" in second["messages"][1]["content"]
    short = ScriptedLLM("{}")
    LLMReader(short, max_tokens=16).read("q", chunk("t"))
    assert short.calls[0]["max_tokens"] == 16
    assert READER_SCHEMA["required"] == ["answer", "confidence"]


@pytest.mark.parametrize("output, expected", [
    ('{"answer": "William Dieterle", "confidence": 0.9}', Reading("William Dieterle", 0.9)),
    (' {"answer":" 1944 ","confidence":1}\n', Reading("1944", 1.0)),
    ('{"answer": 1944, "confidence": 0.8}', Reading("1944", 0.8)),              # a year as a number
    ('Sure! {"answer": "Kismet", "confidence": 0.7} Hope it helps.', Reading("Kismet", 0.7)),
    ('{"answer": "Kismet", "confidence": 1.7}', Reading("Kismet", 1.0)),        # clipped
    ('{"answer": "Kismet", "confidence": -0.2}', Reading("Kismet", 0.0)),
    ('{"answer": "Kismet", "confidence": 1e999}', Reading("Kismet", 1.0)),      # inf
    ('{"answer": "Kismet", "confidence": NaN}', Reading("Kismet", 0.0)),
    ('{"answer": "Kismet", "confidence": "high"}', Reading("Kismet", 0.0)),     # not a number
    ('{"answer": "Kismet", "confidence": true}', Reading("Kismet", 0.0)),
    ('{"answer": "Kismet"}', Reading("Kismet", 0.0)),
    ('{"answer": "", "confidence": 0.9}', Reading("", 0.0)),                    # found nothing
    ('{"answer": null, "confidence": 0.9}', Reading("", 0.0)),
    ('{"answer": "William Die', Reading("", 0.0)),                              # cut off by max_tokens
    ("William Dieterle", Reading("", 0.0)),
    ('["William Dieterle"]', Reading("", 0.0)),
    ("", Reading("", 0.0)),
])
def test_llm_reader_parses_outputs_robustly(output, expected):
    assert parse_reading(output) == expected
    assert LLMReader(ScriptedLLM(output)).read("q", chunk("t")) == expected


# ---------------------------------------------------------------- make_reader

def test_make_reader():
    assert READERS == ("extractive", "llm")
    assert isinstance(make_reader("extractive"), ExtractiveReader)
    llm = ScriptedLLM()
    reader = make_reader("llm", llm)
    assert isinstance(reader, LLMReader) and reader.llm is llm and reader.max_tokens == 32
    assert [make_reader(n, llm).name for n in READERS] == list(READERS)
    with pytest.raises(ValueError, match="llm reader needs a model"):
        make_reader("llm")
    with pytest.raises(ValueError, match="'bm25'"):
        make_reader("bm25", llm)
