"""The default backend: llama.cpp in-process through llama-cpp-python.

The chat template comes from the GGUF metadata and is applied here, so the rendered
prompt text (part of the cache key) is exactly what the model evaluates. A base model
(no chat template, e.g. Gemma 3 270M) is prompted with plain text instead
(:meth:`LlamaCppBackend.render_text`). Consecutive prompts that share a token prefix
reuse llama.cpp's KV cache; ``eval_tokens`` reports what was really evaluated.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from workbench.models import slot as model_slot
from workbench.models.base import Choice, Generation, ModelError, Prompt, PromptError, Sampling
from workbench.models.gguf import GGUFError, read_header
from workbench.models.loadcheck import llama_errors, llama_reason
from workbench.models.locate import resolve_model
from workbench.utf8 import complete_utf8_prefix
from workbench.cores import usable_cores

# llama-cpp-python is imported lazily: importing it costs ~0.3 s and most verbs never generate.

#: A test aid, never for an evaluation: set to a seed, every generation's logits get seeded noise
#: before the (greedy) choice, so the text differs from the greedy one as it may on another CPU
#: (llama.cpp's float sums run in another order there). The suite must pass this way too
#: (README, "Tests"). The model id is marked, so such generations never meet greedy ones in the cache.
PERTURB_ENV = "WORKBENCH_PERTURB_LOGITS"
PERTURB_SCALE = 3.0


def perturbation() -> tuple[str, Callable] | None:
    """``(mark, logits processor)`` when :data:`PERTURB_ENV` is set, else None.

    The noise is a pure function of (seed, position, previous token): the same prompt gives
    the same perturbed text every time on a machine, so caching and resuming behave as ever.
    """
    seed = os.environ.get(PERTURB_ENV)
    if not seed:
        return None
    base = int(hashlib.sha256(seed.encode()).hexdigest()[:15], 16)

    def noise(input_ids, scores):
        last = int(input_ids[-1]) if len(input_ids) else 0
        rng = np.random.default_rng([base, len(input_ids), last])
        return scores + rng.normal(0.0, PERTURB_SCALE, scores.shape).astype(scores.dtype)

    return f"perturbed:{seed}", noise


def split_model_id(model_id: str) -> tuple[str, str | None]:
    """``(sha256, "perturbed:SEED" or None)`` of a model id made by :func:`model_id_of`."""
    sha, sep, seed = model_id.partition("+perturbed:")
    return (sha, f"perturbed:{seed}") if sep else (model_id, None)


def model_id_of(sha256: str) -> str:
    """The id a generation of the GGUF with this sha256 is cached under: the sha, marked when perturbed."""
    perturbed = perturbation()
    if perturbed is None or sha256.endswith(f"+{perturbed[0]}"):
        return sha256
    return f"{sha256}+{perturbed[0]}"


def _load_llama(path: Path, **kwargs):
    from llama_cpp import Llama

    with llama_errors() as errors:
        try:
            return Llama(model_path=str(path), verbose=False, **kwargs)
        except (ValueError, RuntimeError, OSError) as exc:
            reason = llama_reason(errors) if errors else str(exc)
            raise ModelError(f"{path}: llama.cpp could not load the model ({reason})") from exc


def gguf_chat_template(path: str | Path) -> str:
    """The chat template in a GGUF's metadata, ``""`` when it has none (a base model).

    Read from the header (:func:`~workbench.models.gguf.read_header`): nothing is loaded, no model
    slot is taken, and llama.cpp prints nothing (a vocabulary-only load warned of its context).
    """
    try:
        template = read_header(path).metadata.get("tokenizer.chat_template")
    except (GGUFError, OSError) as exc:
        raise ModelError(f"{path}: cannot read the GGUF header ({exc})") from None
    return template if isinstance(template, str) else ""



# The option tokens of each (model file's sha256, option set): the vocabulary is the file's, so they hold for every
# load of it in this process.
_OPTION_TOKENS: dict[tuple[str, tuple[str, ...]], list[np.ndarray]] = {}

class LlamaCppBackend:
    """A GGUF model loaded in this process. One generation at a time (``concurrency = 1``).

    It holds the machine-wide model slot (:mod:`workbench.models.slot`) from before the
    model loads until ``close()``: a second process waits for it rather than fight over
    the cores. ``on_wait(message)`` hears once that it waits, and for whom; ``stop`` ends
    the wait (:class:`~workbench.models.slot.ModelSlotStopped`).
    """

    name = "llamacpp"
    concurrency = 1

    def __init__(self, path: str | Path, model_id: str, *, n_ctx: int = 2048, n_threads: int | None = None,
                 n_gpu_layers: int = 0, seed: int = 0, on_wait: Callable[[str], None] | None = None,
                 stop: threading.Event | None = None, chat: bool = True):
        """Load ``path``; ``chat=False`` accepts a GGUF without a chat template (plain-completion prompts only)."""
        self.path = Path(path)
        perturbed = perturbation()
        self.model_id = model_id_of(model_id)
        self._processors = None if perturbed is None else [perturbed[1]]
        self.n_ctx = n_ctx
        # A GPU run (n_gpu_layers > 0) takes the slot too: the layers left on the CPU, the
        # sampling and the grammar still run on n_threads CPU threads, and two processes
        # would also share one GPU's memory.
        self._slot = model_slot.acquire(on_wait=on_wait, stop=stop)
        try:
            # Prompt evaluation runs on n_threads_batch, which llama-cpp-python would set to every CPU of
            # the machine, not the cores this process may use.
            threads = n_threads or usable_cores()
            self.llm = _load_llama(self.path, n_ctx=n_ctx, n_threads=threads, n_threads_batch=threads,
                                   n_gpu_layers=n_gpu_layers, seed=seed)
        except BaseException:
            self._slot.release()
            raise
        self._set_up_template(chat)
        self._grammars: dict[str, object] = {}
        self._lock = threading.Lock()

    def _set_up_template(self, chat: bool) -> None:
        """The GGUF's chat template and its formatter; a chat run refuses a model without one (closing it)."""
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        template = self.llm.metadata.get("tokenizer.chat_template") or ""
        if chat and not template:
            self.close()
            raise ModelError(f"{self.path}: the GGUF has no tokenizer.chat_template (a base model); pass a chat "
                             "model (`workbench run --prompt-style completion` prompts a base model with plain text)")
        self.chat_template = template
        eos, bos = self.llm.token_eos(), self.llm.token_bos()
        self._eos_text = self.llm._model.token_get_text(eos) if eos != -1 else ""
        self._formatter = Jinja2ChatFormatter(
            template=template,
            eos_token=self._eos_text,
            bos_token=self.llm._model.token_get_text(bos) if bos != -1 else "",
            stop_token_ids=[eos],
        ) if template else None

    def render(self, messages: Sequence[dict[str, str]]) -> Prompt:
        """Apply the GGUF chat template and tokenize; the text is the cache key's prompt."""
        if self._formatter is None:
            raise ModelError(f"{self.path}: the GGUF has no tokenizer.chat_template: it takes plain-completion "
                             "prompts only (--prompt-style completion)")
        text = self._formatter(messages=[dict(m) for m in messages]).prompt
        prompt = Prompt(messages=tuple((m["role"], m["content"]) for m in messages), text=text)
        return Prompt(prompt.messages, text, tokens=len(self._tokens(prompt)))

    def render_text(self, text: str) -> Prompt:
        """A plain-completion prompt: ``text`` as is, no chat template; BOS is added when it is tokenized."""
        prompt = Prompt(messages=(("user", text),), text=text, completion=True)
        return replace(prompt, tokens=len(self._tokens(prompt)))

    def _tokens(self, prompt: Prompt) -> list[int]:
        if prompt.completion:
            # No template writes a BOS here: the vocabulary's own add-BOS setting does. Special
            # tokens are not parsed: the text is data (evidence may spell "<eos>"), never control.
            return self.llm.tokenize(prompt.text.encode("utf-8"), add_bos=True, special=False)
        # The Jinja2 formatter writes any BOS itself (added_special), so none is added here.
        return self.llm.tokenize(prompt.text.encode("utf-8"), add_bos=False, special=True)

    def _grammar(self, schema: dict | None, gbnf: str | None = None):
        from llama_cpp import LlamaGrammar

        if schema is None and gbnf is None:
            return None
        key = gbnf if gbnf is not None else json.dumps(schema, sort_keys=True)
        if key not in self._grammars:
            self._grammars[key] = (LlamaGrammar.from_string(gbnf, verbose=False) if gbnf is not None
                                   else LlamaGrammar.from_json_schema(key, verbose=False))
        return self._grammars[key]

    def generate(self, prompt: Prompt, sampling: Sampling, json_schema: dict | None = None,
                 grammar: str | None = None) -> Generation:
        """Greedy unless ``sampling.temperature`` > 0; constrained by ``json_schema`` or a GBNF ``grammar``."""
        tokens = self._tokens(prompt)
        if len(tokens) + sampling.max_tokens > self.n_ctx:
            raise PromptError(f"prompt is {len(tokens)} tokens; with max_tokens {sampling.max_tokens} it exceeds "
                              f"n_ctx {self.n_ctx}")
        with self._lock:
            reused = self._reusable_prefix(tokens)
            start = time.perf_counter()
            out = self.llm.create_completion(
                prompt=tokens, max_tokens=sampling.max_tokens, temperature=sampling.temperature,
                top_p=sampling.top_p, top_k=sampling.top_k, repeat_penalty=sampling.repeat_penalty,
                seed=sampling.seed, grammar=self._grammar(json_schema, grammar),
                stop=[self._eos_text] if self._eos_text else None, logits_processor=self._logits_processors())
            seconds = time.perf_counter() - start
        choice = out["choices"][0]
        usage = out.get("usage", {})
        return Generation(text=choice["text"], prompt_tokens=usage.get("prompt_tokens", len(tokens)),
                          completion_tokens=usage.get("completion_tokens", 0), eval_tokens=len(tokens) - reused,
                          seconds=seconds, finish_reason=choice.get("finish_reason"))

    def choose(self, prompt: Prompt, options: Sequence[str]) -> Choice:
        """Which of ``options`` the model would write next: one forward pass, no generation.

        The prompt is evaluated (only what the KV cache does not already hold: a prompt that
        shares its start with the previous one reuses it) and the next-token logits are read
        as a grammar allowing exactly the options would read them at its first step: an
        option's score is the highest logit of any token that can begin it ("E", "En", "Ent"
        for "Entailment"). Greedy, as generation is, the best option is chosen, so the choice
        is the option that greedy generation under that grammar would write. The options must
        start with different characters (a token that could begin several counts for none).
        """
        tokens = self._tokens(prompt)
        allowed = self._first_tokens(options)
        if len(tokens) >= self.n_ctx:
            raise PromptError(f"prompt is {len(tokens)} tokens; it exceeds n_ctx {self.n_ctx}")
        with self._lock:
            # At least the last token is evaluated: its logits are the ones read.
            reused = min(self._reusable_prefix(tokens), len(tokens) - 1)
            start = time.perf_counter()
            self.llm.n_tokens = reused
            self.llm.eval(tokens[reused:])
            logits = np.ctypeslib.as_array(self.llm._ctx.get_logits(), shape=(self.llm.n_vocab(),)).copy()
            if self._processors is not None:
                for process in self._processors:
                    logits = process(np.asarray(tokens), logits)
            seconds = time.perf_counter() - start
        scores = [float(np.max(logits[ids])) for ids in allowed]
        best = max(range(len(options)), key=lambda i: scores[i])
        return Choice(best, tuple(scores), prompt_tokens=len(tokens), eval_tokens=len(tokens) - reused,
                      seconds=seconds)

    def _first_tokens(self, options: Sequence[str]) -> list[np.ndarray]:
        """Per option, the ids of the tokens whose bytes begin it (found once per model file and option set in
        this process: one pass over the vocabulary, which a judge loaded again need not repeat)."""
        key = (self.model_id, tuple(options))
        if key not in _OPTION_TOKENS:
            if any(not o for o in options) or len({o[0] for o in options}) != len(options):
                raise ModelError(f"{self.path}: the options {list(options)} must be non-empty and start with "
                                 "different characters")
            encoded = [o.encode("utf-8") for o in options]
            ids: list[list[int]] = [[] for _ in options]
            for token in range(self.llm.n_vocab()):
                piece = self.llm.detokenize([token])
                begins = [i for i, option in enumerate(encoded) if piece and option.startswith(piece)]
                # A piece of one UTF-8 byte can begin two options that share it: it decides nothing.
                if len(begins) == 1:
                    ids[begins[0]].append(token)
            _OPTION_TOKENS[key] = [np.array(x, dtype=np.int64) for x in ids]
        return _OPTION_TOKENS[key]

    def _logits_processors(self):
        if self._processors is None:
            return None
        from llama_cpp import LogitsProcessorList

        return LogitsProcessorList(self._processors)

    def _reusable_prefix(self, tokens: list[int]) -> int:
        """How many leading prompt tokens llama.cpp's KV cache already holds (as ``Llama.generate`` counts)."""
        held = self.llm._input_ids[: self.llm.n_tokens]
        common = 0
        for a, b in zip(held, tokens):
            if a != b:
                break
            common += 1
        # With no suffix left, llama-cpp-python replays one token to refresh the logits.
        return common - 1 if common == len(tokens) and common > 0 else common

    def close(self) -> None:
        """Free the model and give the model slot back (idempotent)."""
        try:
            self.llm.close()
        finally:
            self._slot.release()

    def __del__(self):
        # A backend dropped without close() must not keep other processes off the cores
        # for the rest of this one's life.
        slot = getattr(self, "_slot", None)
        if slot is not None:
            slot.release()


class LlamaTokenizer:
    """A model's own tokenizer as an evidence-budget tokenizer (``llama:PATH`` or ``llama:default``)."""

    def __init__(self, spec: str):
        path = resolve_model(spec or None)
        self.name = f"llama:{spec or 'default'}"
        self._llm = _load_llama(path, vocab_only=True)
        # Cached for the process lifetime: free it before interpreter teardown, when
        # llama-cpp-python's own finalizer would find its C bindings already gone.
        import atexit

        atexit.register(self._llm.close)

    def encode(self, text: str) -> list[int]:
        return self._llm.tokenize(text.encode("utf-8"), add_bos=False, special=False)

    def decode_prefix(self, tokens: Sequence[int], n: int) -> str:
        """Text of the first ``n`` tokens; byte-level BPE models give an exact prefix."""
        data = self._llm.detokenize(list(tokens[:n]))
        return complete_utf8_prefix(data).decode("utf-8", errors="replace")
