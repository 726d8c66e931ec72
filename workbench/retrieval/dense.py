"""Dense retrieval with a GGUF model's embeddings through llama.cpp (mean pooling, cosine).

Only a model the user names is used; nothing is downloaded. The index is the matrix of
normalized document vectors, saved with the ids and the corpus fingerprint.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

import numpy as np

from workbench.models.base import ModelError

META_NAME = "workbench_dense.json"


class DenseIndex:
    """Cosine search over mean-pooled llama.cpp embeddings of each document."""

    def __init__(self, ids: list, vectors: np.ndarray, model_path: str, fingerprint: str):
        self.ids, self.vectors, self.model_path, self.fingerprint = ids, vectors, model_path, fingerprint
        self._llm = None

    @staticmethod
    def _model(model_path: str, n_ctx: int = 512):
        import llama_cpp

        try:
            return llama_cpp.Llama(model_path=model_path, embedding=True, n_ctx=n_ctx, verbose=False,
                                   pooling_type=llama_cpp.LLAMA_POOLING_TYPE_MEAN)
        except (ValueError, RuntimeError, OSError) as exc:
            raise ModelError(f"{model_path}: llama.cpp could not load the embedding model ({exc})") from exc

    @classmethod
    def build(cls, docs: Sequence[tuple[object, str]], model_path: str, fingerprint: str,
              batch: int = 32) -> "DenseIndex":
        """Embed every document (texts past the context are truncated by llama.cpp)."""
        llm = cls._model(model_path)
        ids = [d for d, _ in docs]
        vectors = []
        for start in range(0, len(docs), batch):
            vectors.extend(llm.embed([t for _, t in docs[start:start + batch]], truncate=True))
        index = cls(ids, _normalize(np.asarray(vectors, dtype=np.float32)), model_path, fingerprint)
        index._llm = llm
        return index

    def search_many(self, queries: Sequence[str], k: int = 10) -> list[list[tuple[object, float]]]:
        """Top ``k`` by cosine similarity; ties broken by id order for determinism."""
        if self._llm is None:
            self._llm = self._model(self.model_path)
        q = _normalize(np.asarray(self._llm.embed(list(queries), truncate=True), dtype=np.float32))
        sims = q @ self.vectors.T
        out = []
        order_ids = np.arange(len(self.ids))
        for row in sims:
            top = np.lexsort((order_ids, -row))[:k]
            out.append([(self.ids[i], float(row[i])) for i in top])
        return out

    def save(self, directory: str | Path) -> Path:
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        np.save(directory / "vectors.npy", self.vectors)
        # The metadata is written last: a folder without it is an interrupted save.
        (directory / META_NAME).write_text(json.dumps({"ids": self.ids, "model": self.model_path,
                                                      "fingerprint": self.fingerprint}), encoding="utf-8")
        return directory

    @classmethod
    def load(cls, directory: str | Path) -> "DenseIndex":
        directory = Path(directory)
        meta = json.loads((directory / META_NAME).read_text(encoding="utf-8"))
        return cls(meta["ids"], np.load(directory / "vectors.npy"), meta["model"], meta["fingerprint"])


def _normalize(v: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(v, axis=1, keepdims=True)
    return v / np.where(norms == 0, 1, norms)
