"""The SearChain loop (Xu et al., WWW 2024; docs/design.md §7) over injected parts.

The model plans a whole Chain-of-Query. The first step not yet processed goes to the
retriever (top-1 unit) and a reader:
- an unsolved step gets *completion* feedback with the reader's answer;
- a step whose reader is confident (≥ threshold) and disagrees with the model's answer
  gets *correction* feedback, ``[Query] … [Answer] … [Reference] …``;
- otherwise the step is *verified* and the next unprocessed step is checked, with no
  model call.

After feedback the model regenerates the chain in the same multi-turn chat: a new branch
of the tree, hanging under the node that was corrected or completed. Processed steps are
never checked again. The loop stops when every step of the current chain is processed,
or after ``max_rounds`` feedback rounds. An unparseable chain is a recorded outcome.

Everything model-, retriever- and reader-specific is injected, so the loop logic is
tested on scripted chains; the runner wires in the real model, BM25 and readers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable, Sequence

from workbench.evidence.units import Unit, render_line
from workbench.metrics.scoring import normalize_answer
from workbench.models.base import PromptError
from workbench.pipelines.coq import Chain, ChainParseError, coq_messages, feedback_message, parse_chain
from workbench.pipelines.reader import Reading, answer_agrees

STATUSES = ("model", "verified", "corrected", "completed")


@dataclass
class Node:
    """One distinct step of the tree (node 0, the question, is implicit)."""

    node: int
    parent: int
    branch: int
    query: str
    answer: str | None
    unsolved: bool
    status: str = "model"
    evidence: Unit | None = None
    reader_answer: str | None = None
    confidence: float | None = None
    feedback: str | None = None


@dataclass
class Branch:
    branch: int
    from_node: int
    output: str
    parse_error: str | None = None


@dataclass
class Trace:
    """What one question's SearChain produced: the tree, the final chain and its content."""

    nodes: list[Node] = field(default_factory=list)
    branches: list[Branch] = field(default_factory=list)
    final_nodes: list[int] = field(default_factory=list)    # the final chain's steps, in order
    final_content: str | None = None
    citations: tuple[int, ...] = ()                          # step numbers [n] cited in the final content
    rounds: int = 0
    outcome: str = "verified"                # verified | max_rounds | unparseable | context_full

    @property
    def prediction(self) -> str:
        """The answer the final content gives ("… the answer is X"), else its last step's answer."""
        return extract_answer(self.final_content, [self.node(n) for n in self.final_nodes],
                              self.branches[-1].output if self.branches else "")

    def node(self, number: int) -> Node:
        return self.nodes[number - 1]

    def sources(self) -> dict[str, int]:
        """Where the final chain's knowledge came from: model (verified) / corrected / completed / unchecked."""
        counts = {"model": 0, "corrected": 0, "completed": 0, "unchecked": 0}
        for n in self.final_nodes:
            status = self.node(n).status
            counts["model" if status == "verified" else "unchecked" if status == "model" else status] += 1
        return counts

    def cited_with_reference(self) -> int:
        """Final-chain steps cited as [n] in the final content that carry a retrieved reference."""
        return sum(1 for i, n in enumerate(self.final_nodes, 1)
                   if i in self.citations and self.node(n).evidence is not None)


_ANSWER_IS = re.compile(r"answer\s+is\s*:?\s*(.+)", re.IGNORECASE | re.DOTALL)


def extract_answer(final: str | None, steps: Sequence[Node], raw: str = "") -> str:
    """The prediction for accuracy: after "the answer is" in the final content, else the last step's answer."""
    if final:
        m = _ANSWER_IS.search(final)
        if m:
            return re.sub(r"\[\d+(?:\s*,\s*\d+)*\]", "", m.group(1)).strip().rstrip(".。").strip()
    for node in reversed(steps):
        answer = node.reader_answer if node.status in ("corrected", "completed") else node.answer
        if answer:
            return answer
    return (final or raw).strip()


def _key(query: str) -> str:
    return normalize_answer(query)


@dataclass(frozen=True)
class LoopConfig:
    threshold: float = 0.5       # reader confidence needed to correct a step the model answered
    max_rounds: int = 5          # feedback rounds (regenerations) before giving up


def run_searchain(question: str, *, generate: Callable[[list[dict[str, str]]], str],
                  retrieve: Callable[[str], Unit | None], reader,
                  config: LoopConfig = LoopConfig()) -> Trace:
    """Run SearChain on one question; returns the full trace (tree, branches, final chain).

    ``generate(messages)`` returns the model's reply to a chat; ``retrieve(query)`` the
    top-1 unit (or None); ``reader.read(query, unit)`` a :class:`Reading`.
    """
    trace = Trace()
    messages = coq_messages(question)
    processed: dict[str, int] = {}          # normalized query → its node
    from_node = 0
    while True:
        try:
            output = generate(messages)
        except PromptError:
            if not trace.branches:
                raise
            # The chat outgrew the context window: the last chain stands.
            trace.outcome = "context_full"
            return trace
        messages = [*messages, {"role": "assistant", "content": output}]
        branch = Branch(len(trace.branches), from_node, output)
        trace.branches.append(branch)
        try:
            chain = parse_chain(output)
        except ChainParseError as exc:
            # The first chain unreadable: nothing to verify. A later one: the previous chain
            # stands, with the feedback applied to its node.
            branch.parse_error = str(exc)
            trace.outcome = "unparseable"
            return trace
        chain_nodes = _attach(trace, chain, branch.branch, from_node, processed)
        trace.final_nodes, trace.final_content, trace.citations = chain_nodes, chain.final, chain.citations
        feedback = None
        for number in chain_nodes:
            node = trace.node(number)
            if _key(node.query) in processed:
                continue
            processed[_key(node.query)] = number
            feedback = _check(node, retrieve, reader, config, question)
            if feedback is not None:
                break
        if feedback is None:
            trace.outcome = "verified"
            return trace
        if trace.rounds >= config.max_rounds:
            trace.outcome = "max_rounds"
            return trace
        trace.rounds += 1
        from_node = number
        messages = [*messages, {"role": "user", "content": feedback}]


def _attach(trace: Trace, chain: Chain, branch: int, from_node: int, processed: dict[str, int]) -> list[int]:
    """Map the chain's steps onto the tree: processed queries reuse their node, new ones hang below.

    The first new step of a regenerated chain hangs under the node whose feedback caused
    the regeneration; each further new step under the previous step of the chain.
    """
    out: list[int] = []
    parent = from_node
    seen: dict[str, int] = {}     # a query repeated within one chain is one node
    for step in chain.steps:
        existing = processed.get(_key(step.query), seen.get(_key(step.query)))
        if existing is not None:
            if existing in out:
                continue
            out.append(existing)
            if branch == 0 or existing == from_node:
                parent = existing
            continue
        node = Node(len(trace.nodes) + 1, parent, branch, step.query, step.answer, step.unsolved)
        trace.nodes.append(node)
        seen[_key(step.query)] = node.node
        out.append(node.node)
        parent = node.node
    return out


def _check(node: Node, retrieve, reader, config: LoopConfig, question: str) -> str | None:
    """Verify or complete one step against its top-1 unit; returns the feedback to send, if any."""
    unit = retrieve(node.query)
    if unit is None:
        node.status = "verified" if not node.unsolved else "model"
        return None
    reading: Reading = reader.read(node.query, unit)
    node.evidence, node.reader_answer, node.confidence = unit, reading.answer, reading.confidence
    reference = render_line(unit)
    if node.unsolved:
        if not reading.answer:
            node.status = "model"     # nothing to complete it with: it stays the model's gap
            return None
        node.status = "completed"
        node.feedback = feedback_message("complete", node.query, reading.answer, reference, question)
        return node.feedback
    if reading.confidence >= config.threshold and not answer_agrees(node.answer, reading.answer):
        node.status = "corrected"
        node.feedback = feedback_message("correct", node.query, reading.answer, reference, question)
        return node.feedback
    node.status = "verified"
    return None
