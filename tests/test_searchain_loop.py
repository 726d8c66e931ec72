"""The SearChain loop on scripted chains: completion, correction, verification, max rounds.

The model, the retriever and the reader are scripted here (the loop's logic does not
depend on them); `test_searchain_run.py` runs the real model end to end.
"""

from __future__ import annotations

import pytest

from workbench.evidence.units import Unit
from workbench.models.base import PromptError
from workbench.pipelines.reader import Reading
from workbench.pipelines.searchain import LoopConfig, extract_answer, run_searchain

KISMET = Unit(1, "triple", "Kismet", "directed_by", "William Dieterle")
DIETERLE = Unit(2, "triple", "William Dieterle", "born_in", "Ludwigshafen")
YEAR = Unit(3, "triple", "Kismet", "release_year", "1944")


class Script:
    """Canned chain outputs in order; records every chat it was given."""

    def __init__(self, *outputs):
        self.outputs, self.chats = list(outputs), []

    def __call__(self, messages):
        self.chats.append(messages)
        out = self.outputs.pop(0)
        if isinstance(out, Exception):
            raise out
        return out


class Reader:
    """Readings by query; counts reads."""

    def __init__(self, readings):
        self.readings, self.reads = readings, []

    def read(self, query, unit):
        self.reads.append(query)
        return self.readings[query]


def retriever(table):
    calls = []

    def retrieve(query):
        calls.append(query)
        return table.get(query)

    retrieve.calls = calls
    return retrieve


Q1, Q2 = "Who directed Kismet?", "Where was William Dieterle born?"


def test_an_unsolved_step_is_completed_by_retrieval_and_the_chain_regenerated_under_it():
    generate = Script(
        f"[Query 1]: {Q1}\n[Answer 1]: William Dieterle\n[Query 2]: {Q2}\n[Unsolved Query]\n"
        "[Final Content]: Kismet was directed by William Dieterle [1].",
        f"[Query 1]: {Q1}\n[Answer 1]: William Dieterle\n[Query 2]: {Q2}\n[Answer 2]: Ludwigshafen\n"
        "[Final Content]: William Dieterle [1] was born in Ludwigshafen [2]. So the answer is Ludwigshafen.")
    reader = Reader({Q1: Reading("William Dieterle", 1.0), Q2: Reading("Ludwigshafen", 1.0)})
    trace = run_searchain("Where was the director of Kismet born?", generate=generate,
                          retrieve=retriever({Q1: KISMET, Q2: DIETERLE}), reader=reader)
    assert trace.outcome == "verified" and trace.rounds == 1 and len(trace.branches) == 2
    first, second = trace.nodes
    assert (first.status, second.status) == ("verified", "completed")
    assert second.unsolved and second.reader_answer == "Ludwigshafen" and second.evidence == DIETERLE
    assert second.feedback.startswith(f"[Unsolved Query]: {Q2}\n[Answer]: Ludwigshafen\n[Reference]: [T2]")
    # The regenerated chain reuses both processed steps: no new node, no new check.
    assert trace.final_nodes == [1, 2] and reader.reads == [Q1, Q2]
    assert trace.branches[1].from_node == 2
    # The feedback went back as the next user turn of the same chat.
    assert generate.chats[1][-1] == {"role": "user", "content": second.feedback}
    assert generate.chats[1][-2]["role"] == "assistant"
    assert trace.sources() == {"model": 1, "corrected": 0, "completed": 1, "unchecked": 0}
    assert trace.citations == (1, 2) and trace.cited_with_reference() == 2
    assert trace.prediction == "Ludwigshafen"


def test_a_confident_disagreeing_reader_corrects_a_step_and_new_steps_hang_below_it():
    generate = Script(
        f"[Query 1]: {Q1}\n[Answer 1]: Michael Curtiz\n[Final Content]: Michael Curtiz [1].",
        f"[Query 1]: {Q1}\n[Answer 1]: William Dieterle\n[Query 2]: {Q2}\n[Answer 2]: Ludwigshafen\n"
        "[Final Content]: So the answer is Ludwigshafen [2].")
    reader = Reader({Q1: Reading("William Dieterle", 0.9), Q2: Reading("Ludwigshafen", 0.9)})
    trace = run_searchain("q", generate=generate, retrieve=retriever({Q1: KISMET, Q2: DIETERLE}), reader=reader)
    one, two = trace.nodes
    assert one.status == "corrected" and one.answer == "Michael Curtiz" and one.reader_answer == "William Dieterle"
    assert one.feedback.startswith(f"[Query]: {Q1}\n[Answer]: William Dieterle\n[Reference]: [T1] Kismet")
    assert (two.parent, two.branch, two.status) == (1, 1, "verified")
    assert trace.sources() == {"model": 1, "corrected": 1, "completed": 0, "unchecked": 0}
    assert trace.outcome == "verified" and trace.rounds == 1


def test_an_agreeing_or_unsure_reader_verifies_without_calling_the_model_again():
    q2 = "When was Kismet released?"
    generate = Script(f"[Query 1]: {Q1}\n[Answer 1]: William Dieterle\n[Query 2]: {q2}\n[Answer 2]: 1950\n"
                      "[Final Content]: Dieterle [1], 1950 [2]. So the answer is 1950.")
    reader = Reader({Q1: Reading("Dieterle", 0.9),      # contained in the model's answer: agrees
                     q2: Reading("1944", 0.4)})          # disagrees, but below the threshold
    trace = run_searchain("q", generate=generate, retrieve=retriever({Q1: KISMET, q2: YEAR}), reader=reader,
                          config=LoopConfig(threshold=0.5))
    assert [n.status for n in trace.nodes] == ["verified", "verified"]
    assert trace.nodes[1].confidence == 0.4 and trace.nodes[1].feedback is None
    assert len(generate.chats) == 1 and trace.rounds == 0


def test_every_step_verified_means_one_chain_and_no_feedback():
    generate = Script(f"[Query 1]: {Q1}\n[Answer 1]: William Dieterle\n[Final Content]: So the answer is "
                      "William Dieterle [1].")
    trace = run_searchain("q", generate=generate, retrieve=retriever({Q1: KISMET}),
                          reader=Reader({Q1: Reading("William Dieterle", 1.0)}))
    assert (trace.outcome, trace.rounds, len(trace.branches)) == ("verified", 0, 1)
    assert trace.nodes[0].status == "verified" and trace.nodes[0].feedback is None


def test_the_loop_stops_after_max_rounds_of_feedback():
    outputs = [f"[Query 1]: step {i}\n[Answer 1]: wrong\n[Final Content]: wrong [1]." for i in range(10)]
    generate = Script(*outputs)
    readings = {f"step {i}": Reading("right", 1.0) for i in range(10)}
    trace = run_searchain("q", generate=generate, retrieve=lambda q: KISMET, reader=Reader(readings),
                          config=LoopConfig(max_rounds=2))
    assert trace.outcome == "max_rounds" and trace.rounds == 2
    assert len(trace.branches) == 3 and len(generate.chats) == 3
    assert all(n.status == "corrected" for n in trace.nodes)


def test_an_unparseable_first_chain_is_a_recorded_outcome_not_a_crash():
    trace = run_searchain("q", generate=Script("I think it is Dieterle."), retrieve=lambda q: KISMET,
                          reader=Reader({}))
    assert trace.outcome == "unparseable" and trace.nodes == [] and trace.branches[0].parse_error
    assert trace.prediction == "I think it is Dieterle."


def test_a_chat_that_outgrows_the_context_keeps_the_last_chain():
    generate = Script(f"[Query 1]: {Q1}\n[Answer 1]: Michael Curtiz\n[Final Content]: Curtiz [1].",
                      PromptError("prompt of 5000 tokens exceeds n_ctx 4096"))
    trace = run_searchain("q", generate=generate, retrieve=retriever({Q1: KISMET}),
                          reader=Reader({Q1: Reading("William Dieterle", 1.0)}))
    assert trace.outcome == "context_full" and trace.final_content == "Curtiz [1]."
    assert trace.nodes[0].status == "corrected"


@pytest.mark.parametrize("final, expected", [
    ("Kismet was directed by Dieterle [1]. So the answer is William Dieterle [1].", "William Dieterle"),
    ("The answer is: 1944.", "1944"),
    (None, "from the last step"),
])
def test_the_prediction_is_what_the_final_content_calls_the_answer(final, expected):
    from workbench.pipelines.searchain import Node

    assert extract_answer(final, [Node(1, 0, 0, "q", "from the last step", False)]) == expected
