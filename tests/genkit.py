"""A served model for the tests whose subject is not what a model writes: a resume, a lease, a kill -9, a ledger.

Those tests drive the real CLI in a process of its own and need a model that answers, and answers
at the pace the test sets; what it says only has to be realistic. :class:`ServedModel` is
tests/llama_server.py's ``Canned`` loopback server speaking the OpenAI chat API (the workbench's
``openai`` backend calls it as it calls ``llama_cpp.server``), with

- answers from a function of the request: :func:`reader_text` (seqkit's Reader: the tail of the
  evidence triple whose head the question names, so cells score as their windows do) or
  :func:`replay_text` (SmolLM2's recorded calls, tests/replay.py, for a pass whose prompts
  depend on what the model said before);
- turns (tuikit's ``Turns``): each answer waits until the test allows it, so "killed after
  three answers, with more in flight" holds however fast or loaded the machine is.

No llama.cpp model loads: these tests do not carry the ``real_model`` marker.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from typing import Callable

from llama_server import Canned
from replay import ReplayBackend
from seqkit import Reader
from tuikit import Turns
from workbench.models.base import Prompt, Sampling


def completion(text: str) -> dict:
    """An OpenAI chat completion whose message is ``text``."""
    return {"choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 4}}


def _prompt(request: dict) -> Prompt:
    pairs = tuple((m["role"], m["content"]) for m in request["messages"])
    return Prompt(pairs, json.dumps(pairs, ensure_ascii=False), tokens=None)


def _schema(request: dict) -> dict | None:
    fmt = request.get("response_format") or {}
    return (fmt.get("json_schema") or {}).get("schema") if fmt.get("type") == "json_schema" else fmt.get("schema")


def reader_text(request: dict) -> str:
    """What seqkit's Reader answers to this request's messages: as JSON ``{"answers": [...]}`` when a schema asks."""
    text = Reader().generate(_prompt(request), None).text
    return json.dumps({"answers": [text]}) if request.get("response_format") else text


def replay_text(trace: str) -> Callable[[dict], str]:
    """Answers from ``tests/recorded/TRACE.jsonl`` (what SmolLM2 wrote to each exact call); any other call fails."""
    backend = ReplayBackend(trace)

    def text(request: dict) -> str:
        return backend.generate(_prompt(request), Sampling(max_tokens=request["max_tokens"]), _schema(request),
                                request.get("grammar")).text

    return text


class ServedModel:
    """A loopback server serving the model ``m`` (``ref`` is what a model option takes; ``url`` the API root).

    Each answer is ``text(request)``. With ``paced`` each waits for a turn the test gives
    (:meth:`allow`), or for :meth:`release`; otherwise every answer goes at once. ``requests``
    lists what reached it (the up-front check's probe apart). A context manager: leaving it lets
    every answer go and stops the server.
    """

    def __init__(self, text: Callable[[dict], str] = reader_text, *, paced: bool = False):
        self.turns = Turns()
        if not paced:
            self.turns.release()
        self.server = Canned(answer=lambda request: self._answer(text, request), delay=self._turn)
        self.url = self.server.url
        self.ref = f"{self.url}#m"
        #: What a verb's ``--model`` is then given (``run`` reads a ``--model`` as a path).
        self.options = ("--backend", "openai", "--base-url", self.url, "--model", "m")

    @staticmethod
    def _answer(text: Callable[[dict], str], request: dict):
        try:
            return completion(text(request))
        except AssertionError as exc:   # a call the trace does not hold: the pass fails saying which
            return 500, {"error": {"message": str(exc)}}

    @property
    def requests(self) -> list[dict]:
        return self.server.requests

    def _turn(self, number: int) -> float:
        self.turns.take()
        return 0.0

    def allow(self, n: int = 1) -> None:
        """Let ``n`` more answers go."""
        self.turns.allow(n)

    def release(self) -> None:
        """Let every answer go, now and later."""
        self.turns.release()

    def close(self) -> None:
        self.release()
        self.server.close()

    def __enter__(self) -> ServedModel:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class Stderr:
    """The text a process writes to its stderr (opened as a text pipe), read by a thread as it comes."""

    def __init__(self, proc: subprocess.Popen):
        self.lines: list[str] = []
        self._thread = threading.Thread(target=lambda: self.lines.extend(proc.stderr), daemon=True)
        self._thread.start()

    def wait_for(self, text: str, timeout: float = 120) -> None:
        """Return once ``text`` has been written; fail after ``timeout`` seconds or at the end of the stream."""
        deadline = time.monotonic() + timeout
        while not any(text in line for line in self.lines):
            assert self._thread.is_alive() and time.monotonic() < deadline, f"never said {text!r}: {self.text()}"
            time.sleep(0.05)

    def text(self) -> str:
        """Everything written, once the process has closed its stderr (it ended)."""
        self._thread.join(60)
        return "".join(self.lines)
