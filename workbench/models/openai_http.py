"""The ``openai`` backend: any OpenAI-compatible chat-completions endpoint.

Works with llama.cpp's own ``llama-server``, ``python -m llama_cpp.server``, vLLM and
Ollama. This is how a run scales past one laptop: point ``base_url`` at a GPU box or a
vLLM cluster and let the executor call :meth:`OpenAIBackend.generate` from
``concurrency`` threads at once.

Only the standard library is used (``http.client``), and each thread keeps its own
keep-alive connection, so the backend is thread-safe without a lock around requests.
Every request is bounded as a whole by ``timeout`` (:mod:`workbench.models.http_deadline`):
a server that trickles its answer is given up at the deadline as one that says nothing.

Caching and resume semantics do not change: the executor keys the cache on
``model_id`` (``"<base_url>#<model>"``), ``chat_template`` (``""``, the server applies its
own) and ``Prompt.text``, which here is the canonical JSON of the messages.

Errors:

* transport failures (connection refused/reset, no whole answer within ``timeout``,
  truncated responses) are retried with exponential backoff; when every attempt fails →
  :class:`ServerUnreachable` ("… unreachable after N attempts: …", "… no answer within X s …");
* an HTTP error status is never retried: a 400 saying the context window is exceeded →
  :class:`PromptError` carrying the server's message (this one prompt is skipped); any
  other status → :class:`ModelError` naming the URL, the status and the server's message.
"""

from __future__ import annotations

import http.client
import json
import os
import threading
import time
import urllib.parse
from typing import Any, Sequence

from workbench.models.base import Choice, Generation, ModelError, Prompt, PromptError, Sampling
from workbench.models.http_deadline import connection, exchange

_MAX_BODY_IN_ERROR = 300
# How many alternatives of the first token a choice asks for: OpenAI's API allows at most 20.
TOP_LOGPROBS = 20

# Phrases servers use when a prompt does not fit the context window:
#   llama-cpp-python: code "context_length_exceeded", "This model's maximum context length is …"
#   llama.cpp llama-server: type "exceed_context_size_error", "… exceeds the available context size …"
#   vLLM: "This model's maximum context length is … tokens. However, you requested …"
#   Ollama: truncates silently by default (no error).
_CONTEXT_MARKERS = ("context_length_exceeded", "exceed_context_size", "maximum context length",
                    "context size", "context window", "context length")

# Exceptions that mean "the request did not get a complete HTTP answer": worth retrying.
# ConnectionError covers refused/reset/aborted and http.client.RemoteDisconnected;
# TimeoutError is socket.timeout; HTTPException covers IncompleteRead and BadStatusLine.
_TRANSPORT_ERRORS = (OSError, http.client.HTTPException)


#: Seconds a served model may take to answer one request (``--timeout``'s default): one owner for every role.
DEFAULT_TIMEOUT = 120.0

#: The roles :meth:`OpenAIBackend.check` can prove a served model in (:mod:`workbench.models.check` names them).
GENERATOR, EMBEDDING = "generator", "embedding"
#: What the check's one request asks: a chat model's one token, an embedding model's vector of one short text.
PROBE_MESSAGES = [{"role": "user", "content": "Say OK."}]
PROBE_TEXTS = ["OK"]

# (model_id, role) proven by a probe in this process: the listing is asked every time (a server that
# went down is refused), the probe once, as a model file that loaded is not loaded again.
_PROVEN: set[tuple[str, str]] = set()
_PROVEN_LOCK = threading.Lock()


class ServerUnreachable(ModelError):
    """No complete HTTP answer after every attempt: the server is down or the network is (not the request)."""


class OpenAIBackend:
    """Generate through ``POST {base_url}/chat/completions``.

    ``base_url`` includes the API prefix, e.g. ``http://127.0.0.1:8080/v1``.
    ``retries`` is the total number of attempts per request for transport errors
    (at least one attempt is always made); the wait before attempt k+1 is
    ``backoff * 2**(k-1)`` seconds.

    ``response_format`` selects how a JSON schema is sent:
    ``"json_object"`` (default) sends ``{"type": "json_object", "schema": S}``, which
    llama-cpp-python's server and llama.cpp's ``llama-server`` enforce with a grammar;
    ``"json_schema"`` sends OpenAI's ``{"type": "json_schema", "json_schema": {"name": …,
    "schema": S, "strict": true}}``, which vLLM, Ollama (≥ 0.5) and llama-server enforce.

    ``extra_sampling`` sends the non-OpenAI fields ``top_k`` and ``repeat_penalty``
    (understood by both llama.cpp servers; vLLM accepts ``top_k``). Turn it off for
    servers that reject unknown fields (api.openai.com).
    """

    name = "openai"
    chat_template = ""

    def __init__(self, base_url: str, model: str, *, api_key: str | None = None,
                 concurrency: int = 4, timeout: float = DEFAULT_TIMEOUT, retries: int = 3,
                 backoff: float = 0.5, response_format: str = "json_object",
                 extra_sampling: bool = True) -> None:
        parts = urllib.parse.urlsplit(base_url.strip())
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ModelError(f"{base_url!r}: base URL must look like http://HOST:PORT/v1")
        if not model:
            raise ModelError("the openai backend needs a model name (the server's model id)")
        if concurrency < 1:
            raise ModelError(f"concurrency must be >= 1, got {concurrency}")
        if response_format not in ("json_object", "json_schema"):
            raise ModelError(f"response_format must be 'json_object' or 'json_schema', got {response_format!r}")
        self.base_url = base_url.strip().rstrip("/")
        self.model = model
        self.model_id = f"{self.base_url}#{model}"
        self.concurrency = int(concurrency)
        self.timeout = float(timeout)
        self.retries = max(1, int(retries))
        self.backoff = float(backoff)
        self.response_format = response_format
        self.extra_sampling = extra_sampling
        self._api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY") or None
        self._https = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port
        self._path = parts.path.rstrip("/")
        self._local = threading.local()
        self._conns: list[http.client.HTTPConnection] = []
        self._conns_lock = threading.Lock()

    # -- Backend protocol -------------------------------------------------------------

    def render(self, messages: Sequence[dict[str, str]]) -> Prompt:
        """The server applies its own chat template; the cache sees the canonical messages JSON."""
        msgs = [{"role": m["role"], "content": m["content"]} for m in messages]
        text = json.dumps(msgs, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
        return Prompt(messages=tuple((m["role"], m["content"]) for m in msgs), text=text, tokens=None)

    def render_text(self, text: str) -> Prompt:
        """Refused: this backend speaks chat completions only, so a base model cannot be prompted with plain text."""
        raise ModelError(f"{self.base_url}: the openai backend sends chat messages only; plain-completion "
                         "prompts (--prompt-style completion) need --backend llamacpp")

    def generate(self, prompt: Prompt, sampling: Sampling, json_schema: dict | None = None,
                 grammar: str | None = None, extra: dict[str, Any] | None = None) -> Generation:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": role, "content": content} for role, content in prompt.messages],
            "max_tokens": sampling.max_tokens,
            "temperature": sampling.temperature,
            "top_p": sampling.top_p,
            "seed": sampling.seed,
            "stream": False,
        }
        if self.extra_sampling:
            body["top_k"] = sampling.top_k
            body["repeat_penalty"] = sampling.repeat_penalty
        if json_schema is not None:
            # Keys sorted, as llama.cpp in-process compiles a schema: a server writes an object's properties
            # in the order its schema lists them, so both paths then write the same JSON.
            json_schema = json.loads(json.dumps(json_schema, sort_keys=True))
            if self.response_format == "json_object":
                body["response_format"] = {"type": "json_object", "schema": json_schema}
            else:
                body["response_format"] = {"type": "json_schema",
                                           "json_schema": {"name": "answer", "schema": json_schema,
                                                           "strict": True}}
        if grammar is not None:
            body["grammar"] = grammar  # llama.cpp's server takes GBNF as-is; other servers ignore it
        body.update(extra or {})       # a server's own fields (vLLM's guided_choice)
        started = time.perf_counter()
        data = self._request("POST", "/chat/completions", body)
        seconds = time.perf_counter() - started
        try:
            choice = data["choices"][0]
            text = (choice.get("message") or {}).get("content") or ""
            finish = choice.get("finish_reason")
        except (KeyError, IndexError, TypeError, AttributeError) as exc:
            raise ModelError(f"{self._url('/chat/completions')}: unexpected response shape "
                             f"({type(exc).__name__}: {exc}): {_truncate(json.dumps(data))}") from None
        usage = data.get("usage") or {}
        prompt_tokens = int(usage.get("prompt_tokens") or 0)
        completion_tokens = int(usage.get("completion_tokens") or 0)
        return Generation(text=text, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
                          eval_tokens=prompt_tokens, seconds=seconds, finish_reason=finish,
                          extra={"server_model": data.get("model")} if data.get("model") else {})

    def choose(self, prompt: Prompt, options: Sequence[str]) -> Choice:
        """Which of ``options`` the served model writes next: one request, no free generation.

        The request asks for one token at temperature 0 with its ``top_logprobs`` (llama.cpp's
        servers, vLLM and Ollama give them). An option's score is the highest log-probability of
        a listed token whose text begins it and no other option, as the local path reads its
        logits (:meth:`~workbench.models.llamacpp.LlamaCppBackend.choose`); log-probabilities are
        the logits less one constant, so the same option wins. The options' probabilities
        (:attr:`~workbench.models.base.Choice.probabilities`) are the local path's when every
        option has a token among the 20 listed; an option with none gets 0 (its tokens are less
        likely than the 20th), and the others share its part. Where the server gives no
        log-probabilities, or none of the listed tokens begins an option, one label is generated
        greedily under a grammar allowing exactly the options (``guided_choice`` for vLLM), which
        picks the option the local rule picks, and it gets probability 1.
        """
        if any(not o for o in options) or len({o[0] for o in options}) != len(options):
            raise ModelError(f"the options {list(options)} must be non-empty and start with different characters")
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": role, "content": content} for role, content in prompt.messages],
            "max_tokens": 1, "temperature": 0.0, "logprobs": True, "top_logprobs": TOP_LOGPROBS, "stream": False,
        }
        started = time.perf_counter()
        data = self._request("POST", "/chat/completions", body)
        scores = [float("-inf")] * len(options)
        for text, logprob in _first_token_logprobs(data):
            begins = [i for i, option in enumerate(options) if text and option.startswith(text)]
            if len(begins) == 1:     # a token that could begin two options decides nothing
                scores[begins[0]] = max(scores[begins[0]], logprob)
        usage = (data.get("usage") if isinstance(data, dict) else None) or {}
        prompt_tokens = int(usage.get("prompt_tokens") or 0)
        if max(scores) == float("-inf"):
            # Greedy under a grammar allowing exactly the options writes the option whose first token is most
            # likely: the local rule. llama.cpp's servers take GBNF as it is; vLLM takes the options as a choice.
            grammar = "root ::= " + " | ".join(json.dumps(o, ensure_ascii=False) for o in options)
            generation = self.generate(prompt, Sampling(max_tokens=16), grammar=grammar,
                                       extra={"guided_choice": list(options)})
            label = generation.text.strip()
            if label not in options:
                raise ModelError(f"{self._url('/chat/completions')}: gave no log-probabilities, and its answer "
                                 f"{generation.text!r} is none of {list(options)}")
            scores = [0.0 if option == label else float("-inf") for option in options]
            prompt_tokens += generation.prompt_tokens
        index = max(range(len(options)), key=lambda i: scores[i])
        return Choice(index, tuple(scores), prompt_tokens=prompt_tokens, eval_tokens=prompt_tokens,
                      seconds=time.perf_counter() - started)

    def embeddings(self, texts: Sequence[str]) -> list[list[float]]:
        """The vectors of ``texts`` from ``POST {base_url}/embeddings`` (one request for the batch), in order.

        As the server returns them (vLLM, llama-server and ``llama_cpp.server --embedding true``
        pool as the model says; whether they normalize varies: the caller does).
        """
        return self._embeddings(texts, None)

    def _embeddings(self, texts: Sequence[str], deadline: float | None) -> list[list[float]]:
        data = self._request("POST", "/embeddings", {"model": self.model, "input": list(texts)}, deadline)
        try:
            items = sorted(data["data"], key=lambda d: d["index"])
            vectors = [[float(x) for x in d["embedding"]] for d in items]
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ModelError(f"{self._url('/embeddings')}: unexpected response shape ({type(exc).__name__}: {exc}): "
                             f"{_truncate(json.dumps(data))}") from None
        if len(vectors) != len(texts) or any(isinstance(v[0] if v else None, list) for v in vectors):
            raise ModelError(f"{self._url('/embeddings')}: {len(vectors)} pooled vectors for {len(texts)} texts "
                             "(a server that returns one vector per token needs pooling turned on)")
        return vectors

    def close(self) -> None:
        """Close every keep-alive connection opened by any thread."""
        with self._conns_lock:
            conns, self._conns = self._conns, []
        for conn in conns:
            try:
                conn.close()
            except OSError:
                pass
        self._local = threading.local()

    # -- extras -----------------------------------------------------------------------

    def check(self, role: str | None = None) -> list[str]:
        """Ask the server what a run needs, within one deadline of ``timeout`` seconds in all; returns the
        model ids it lists.

        ``GET {base_url}/models`` must be an OpenAI model list (an object whose ``data`` lists
        objects with ``id``s) naming this model. With a ``role`` (:data:`GENERATOR`, :data:`EMBEDDING`),
        one tiny request then proves the model serves it: a chat completion of one token with the
        OpenAI shape, or the vector of one short text (once per process: see ``_PROVEN``).
        Raises :class:`ServerUnreachable` when the server does not answer in time, :class:`ModelError`
        (one line saying what the server answered) when it answers something else, so a run fails
        before any job is written.
        """
        if role not in (None, GENERATOR, EMBEDDING):
            raise ValueError(f"unknown role {role!r}")
        deadline = time.monotonic() + self.timeout
        ids = _model_ids(self._url("/models"), self._request("GET", "/models", None, deadline))
        if self.model not in ids and f"{self.model}:latest" not in ids:   # Ollama's name without its tag
            listed = ", ".join(ids[:10]) + (f" … ({len(ids)} in all)" if len(ids) > 10 else "")
            raise ModelError(f"{self.base_url}: model {self.model!r} is not among the served models: "
                             f"{listed or '(the server lists none)'}")
        if role is not None and (self.model_id, role) not in _PROVEN:
            self._probe(role, deadline)
            with _PROVEN_LOCK:
                _PROVEN.add((self.model_id, role))
        return ids

    def _probe(self, role: str, deadline: float) -> None:
        """One request the role's passes make, as small as it gets; refused in one line if it is not answered so."""
        try:
            if role == EMBEDDING:
                self._embeddings(PROBE_TEXTS, deadline)
                return
            body = {"model": self.model, "messages": PROBE_MESSAGES, "max_tokens": 1, "temperature": 0.0,
                    "stream": False}
            data = self._request("POST", "/chat/completions", body, deadline)
        except PromptError as exc:   # a one-word prompt that does not fit: the model cannot serve
            raise ModelError(f"{self._url('/chat/completions')}: {exc}") from None
        choices = data.get("choices") if isinstance(data, dict) else None
        if not (isinstance(choices, list) and choices and isinstance(choices[0], dict)
                and isinstance(choices[0].get("message"), dict)):
            raise ModelError(f"{self._url('/chat/completions')} answered {_truncate(json.dumps(data), 120)} "
                             "(not an OpenAI chat completion: no choices[0].message)")

    # -- HTTP -------------------------------------------------------------------------

    def _url(self, endpoint: str) -> str:
        return f"{self.base_url}{endpoint}"

    def _connection(self) -> tuple[http.client.HTTPConnection, bool]:
        """This thread's keep-alive connection, and whether it was reused from an earlier call."""
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            return conn, True
        conn = connection(self._https, self._host, self._port, self.timeout)
        self._local.conn = conn
        with self._conns_lock:
            self._conns.append(conn)
        return conn, False

    def _drop_connection(self) -> None:
        conn = getattr(self._local, "conn", None)
        self._local.conn = None
        if conn is not None:
            try:
                conn.close()
            except OSError:
                pass
            with self._conns_lock:
                if conn in self._conns:
                    self._conns.remove(conn)

    def _request(self, method: str, endpoint: str, body: dict | None, deadline: float | None = None) -> Any:
        """The JSON answer to one request: each attempt bounded as a whole by ``timeout``, and every attempt
        (backoff included) by ``deadline`` (``time.monotonic()``) when given."""
        url = self._url(endpoint)
        headers = {"Accept": "application/json"}
        payload = None
        if body is not None:
            payload = json.dumps(body, ensure_ascii=False).encode("utf-8")
            headers["Content-Type"] = "application/json"
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        last: BaseException | None = None
        attempt = 0
        while attempt < self.retries:
            conn, reused = self._connection()
            ends = time.monotonic() + self.timeout
            try:
                status, raw, will_close = exchange(conn, method, self._path + endpoint, payload, headers,
                                                   ends if deadline is None else min(ends, deadline))
                if will_close:
                    self._drop_connection()
            except _TRANSPORT_ERRORS as exc:
                self._drop_connection()
                if reused and isinstance(exc, (ConnectionError, http.client.BadStatusLine)):
                    # The server closed an idle keep-alive connection (uvicorn does after
                    # 5 s): reconnect at once, without spending an attempt.
                    continue
                attempt += 1
                last = exc
                pause = self.backoff * 2 ** (attempt - 1)
                if attempt < self.retries and (deadline is None or time.monotonic() + pause < deadline):
                    time.sleep(pause)
                    continue
                break
            return self._decode(url, status, raw)
        attempts = f"{attempt} attempt{'s' if attempt != 1 else ''}"
        if isinstance(last, TimeoutError):
            raise ServerUnreachable(f"{url}: no answer within {self.timeout:g} s ({attempts}; --timeout sets it)")
        reason = f"{type(last).__name__}: {last}" if last is not None else "no attempt made"
        raise ServerUnreachable(f"{url}: server unreachable after {attempts}: {reason}")

    def _decode(self, url: str, status: int, raw: bytes) -> Any:
        text = raw.decode("utf-8", errors="replace")
        try:
            data = json.loads(text) if text.strip() else None
        except json.JSONDecodeError:
            data = None
        if 200 <= status < 300:
            if data is None:
                raise ModelError(f"{url}: HTTP {status} but the body is not JSON: {_truncate(text)}")
            return data
        message = _error_message(data, text)
        if status == 400 and _is_context_error(data, text):
            raise PromptError(f"prompt does not fit the model's context window: {message}")
        hint = ""
        if status in (401, 403):
            hint = " (check the API key in OPENAI_API_KEY)"
        elif status == 404:
            hint = " (check the base URL: it usually ends in /v1)"
        raise ModelError(f"{url}: HTTP {status}: {_truncate(message)}{hint}")


def _model_ids(url: str, data: Any) -> list[str]:
    """The ids of an OpenAI model list (``{"data": [{"id": …}, …]}``); anything else is refused in one line."""
    items = data.get("data") if isinstance(data, dict) else None
    if not isinstance(items, list) or not all(isinstance(m, dict) and isinstance(m.get("id"), str) for m in items):
        raise ModelError(f"{url} answered {_truncate(json.dumps(data), 120)} (not an OpenAI model list: "
                         'an object whose "data" lists models with "id"s)')
    return [m["id"] for m in items]


def _first_token_logprobs(data: Any) -> list[tuple[str, float]]:
    """(token text, log-probability) of the first generated token's listed alternatives, as OpenAI's chat
    format gives them (``choices[0].logprobs.content[0].top_logprobs``); empty when the server gave none."""
    try:
        first = data["choices"][0]["logprobs"]["content"][0]
        listed = first.get("top_logprobs") or [first]
        return [(str(t["token"]), float(t["logprob"])) for t in listed if t.get("logprob") is not None]
    except (KeyError, IndexError, TypeError, AttributeError, ValueError):
        return []


def _error_message(data: Any, text: str) -> str:
    """The server's error message: OpenAI puts it at error.message; others vary."""
    if isinstance(data, dict):
        err = data.get("error")
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])
        if isinstance(err, str) and err:
            return err
        for key in ("message", "detail"):
            if data.get(key):
                return data[key] if isinstance(data[key], str) else json.dumps(data[key])
    return text.strip() or "(empty body)"


def _is_context_error(data: Any, text: str) -> bool:
    haystack = text.lower()
    if isinstance(data, dict) and isinstance(data.get("error"), dict):
        err = data["error"]
        haystack += " " + " ".join(str(err.get(k) or "") for k in ("code", "type", "message")).lower()
    return any(marker in haystack for marker in _CONTEXT_MARKERS)


def _truncate(text: str, limit: int = _MAX_BODY_IN_ERROR) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "…"
