"""BM25 retrieval over (id, text) documents, backed by ``bm25s``.

We tokenize ourselves (``workbench.retrieval.text``) and build the vocabulary
ourselves in first-occurrence order: ``bm25s`` builds its vocabulary from a
``set`` when given token strings, which makes the saved files differ from run
to run (string hash randomization).  Scoring uses ``bm25s``'s precomputed
sparse matrix; top-k selection is our own so that equal scores are broken by
document id (``bm25s``' own top-k leaves tie order to ``argpartition``).

Documents that share no term with the query (score 0) are never returned, so a
search can return fewer than ``k`` results.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Iterable, Sequence, Union

import numpy as np

from workbench.filekinds import read_regular
from workbench.retrieval.text import detect_mode, tokenize

DocId = Union[str, int]
META_NAME = "workbench_bm25.json"
FORMAT_VERSION = 1


def _id_key(doc_id: DocId) -> tuple:
    # ints sort before strs; within a type, natural order
    return (0, doc_id, "") if isinstance(doc_id, int) else (1, 0, doc_id)


def _check_id(doc_id) -> None:
    if isinstance(doc_id, bool) or not isinstance(doc_id, (str, int)):
        raise TypeError(f"document id must be str or int, got {type(doc_id).__name__}: {doc_id!r}")


def fingerprint(docs: Iterable[tuple[DocId, str]]) -> str:
    """sha256 over the (id, text) pairs, independent of their order.

    Ids are unique, so sorting by id gives a canonical order; each pair is
    JSON-encoded on its own line, which is unambiguous.
    """
    pairs = sorted(((i, t) for i, t in docs), key=lambda p: _id_key(p[0]))
    h = hashlib.sha256()
    for doc_id, text in pairs:
        h.update(json.dumps([doc_id, text], ensure_ascii=False).encode("utf-8"))
        h.update(b"\n")
    return h.hexdigest()


def triple_text(head: str, relation: str, tail: str) -> str:
    """Text of a KG triple for lexical retrieval: ``"Kismet directed by X"``."""
    return f"{head} {relation.replace('_', ' ')} {tail}"


def triple_docs(triples: Iterable[Sequence[str]]) -> list[tuple[str, str]]:
    """(id, text) docs for triples; the id is the JSON array ``[h, r, t]``
    (``json.loads(id)`` recovers the triple)."""
    return [
        (json.dumps([h, r, t], ensure_ascii=False), triple_text(h, r, t)) for h, r, t in triples
    ]


class BM25Index:
    """BM25 index over ``(id, text)`` documents.

    ``mode`` is a tokenizer mode (``jieba``, ``bigram``, ``en``, ``auto``);
    ``auto`` is resolved once over the corpus and stored as ``index.mode``.
    """

    def __init__(
        self,
        docs: Iterable[tuple[DocId, str]],
        mode: str = "auto",
        *,
        stopwords: bool = False,
        k1: float = 1.5,
        b: float = 0.75,
        method: str = "lucene",
    ):
        import bm25s

        docs = list(docs)
        if not docs:
            raise ValueError("cannot build a BM25 index over an empty corpus")
        ids: list[DocId] = []
        seen: set = set()
        for doc_id, _ in docs:
            _check_id(doc_id)
            if doc_id in seen:
                raise ValueError(f"duplicate document id {doc_id!r}")
            seen.add(doc_id)
            ids.append(doc_id)
        texts = [t for _, t in docs]
        if mode == "auto":
            mode = detect_mode(texts)
        self.mode = mode
        self.stopwords = stopwords
        self.ids = ids
        self.fingerprint = fingerprint(docs)

        vocab: dict[str, int] = {}
        corpus_ids: list[list[int]] = []
        for text in texts:
            row = []
            for tok in tokenize(text, mode, stopwords=stopwords):
                tid = vocab.get(tok)
                if tid is None:
                    tid = vocab[tok] = len(vocab)
                row.append(tid)
            corpus_ids.append(row)
        if not vocab:
            raise ValueError("no document produced any token; nothing to index")
        self._bm25 = bm25s.BM25(k1=k1, b=b, method=method)
        # the tuple form skips bm25s' set-ordered vocab; no empty token (we
        # handle empty queries ourselves, and the tuple form would add it out
        # of range of the score matrix anyway)
        self._bm25.index((corpus_ids, vocab), create_empty_token=False, show_progress=False)
        self._post_init()

    def _post_init(self) -> None:
        order = sorted(range(len(self.ids)), key=lambda i: _id_key(self.ids[i]))
        rank = np.empty(len(self.ids), dtype=np.int64)
        rank[np.asarray(order, dtype=np.int64)] = np.arange(len(self.ids), dtype=np.int64)
        self._id_rank = rank
        self._vocab = self._bm25.vocab_dict

    def __len__(self) -> int:
        return len(self.ids)

    def __repr__(self) -> str:
        return f"BM25Index(n={len(self.ids)}, mode={self.mode!r}, fingerprint={self.fingerprint[:12]}…)"

    # ------------------------------------------------------------------ search
    def query_tokens(self, query: str) -> list[str]:
        return tokenize(query, self.mode, stopwords=self.stopwords)

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every document (index order) for ``query``."""
        tids = [self._vocab[t] for t in self.query_tokens(query) if t in self._vocab]
        if not tids:
            return np.zeros(len(self.ids), dtype=np.float32)
        return self._bm25.get_scores_from_ids(tids)

    def search(self, query: str, k: int = 10) -> list[tuple[DocId, float]]:
        """Top ``k`` ``(id, score)`` by descending score, ties by ascending id."""
        if k <= 0:
            return []
        scores = self.scores(query)
        pos = np.flatnonzero(scores > 0)
        if pos.size == 0:
            return []
        sub = scores[pos]
        if pos.size > k:
            kth = np.partition(sub, pos.size - k)[pos.size - k]  # k-th largest
            keep = sub >= kth  # keeps every doc tied with the k-th
            pos, sub = pos[keep], sub[keep]
        order = np.lexsort((self._id_rank[pos], -sub))[:k]
        return [(self.ids[i], float(s)) for i, s in zip(pos[order].tolist(), sub[order].tolist())]

    def search_many(self, queries: Sequence[str], k: int = 10) -> list[list[tuple[DocId, float]]]:
        return [self.search(q, k) for q in queries]

    # ------------------------------------------------------------ persistence
    def save(self, directory: str | os.PathLike) -> Path:
        """Write the bm25s index plus ids/mode/fingerprint to ``directory``.

        The metadata file is written last (atomically), so a directory with a
        partial save has no metadata and ``load`` refuses it.
        """
        import bm25s

        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        meta_path = d / META_NAME
        if meta_path.exists():
            meta_path.unlink()
        self._bm25.save(str(d), show_progress=False)
        meta = {
            "format": FORMAT_VERSION,
            "mode": self.mode,
            "stopwords": self.stopwords,
            "fingerprint": self.fingerprint,
            "n_docs": len(self.ids),
            "bm25s_version": bm25s.__version__,
            "ids": self.ids,
        }
        tmp = d / (META_NAME + ".tmp")
        tmp.write_text(json.dumps(meta, ensure_ascii=False), encoding="utf-8")
        os.replace(tmp, meta_path)
        return d

    @classmethod
    def load(cls, directory: str | os.PathLike, *, mmap: bool = False) -> "BM25Index":
        import bm25s

        d = Path(directory)
        meta_path = d / META_NAME
        if not meta_path.exists():
            raise FileNotFoundError(f"{meta_path}: not a saved BM25Index (missing metadata)")
        # A regular file only, read without blocking (the caller looked at the directory; this is its last word).
        meta = json.loads(read_regular(meta_path, follow=False).decode("utf-8"))
        if meta.get("format") != FORMAT_VERSION:
            raise ValueError(f"{meta_path}: unsupported format {meta.get('format')!r}")
        self = cls.__new__(cls)
        self.mode = meta["mode"]
        self.stopwords = meta["stopwords"]
        self.fingerprint = meta["fingerprint"]
        self.ids = meta["ids"]
        self._bm25 = bm25s.BM25.load(str(d), mmap=mmap, show_progress=False)
        n = int(self._bm25.scores["num_docs"])
        if n != len(self.ids):
            raise ValueError(f"{d}: index has {n} documents but metadata lists {len(self.ids)} ids")
        self._post_init()
        return self
