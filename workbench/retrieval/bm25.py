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
import secrets
import shutil
from pathlib import Path
from typing import Iterable, Sequence, Union

import numpy as np

from workbench.dbfiles import read_regular, write_new
from workbench.retrieval.text import detect_mode, tokenize

DocId = Union[str, int]
META_NAME = "workbench_bm25.json"
VOCAB_NAME = "vocab.json"
IDS_NAME = "ids.json"
# 2: the workbench's own files (written new and renamed into place, read within recorded sizes), not bm25s'.
FORMAT_VERSION = 2
#: The metadata is a few hundred bytes: a file past this is not one the workbench wrote.
META_LIMIT = 64 * 1024
# bm25s.BM25's constructor arguments, saved with the index and given back on load.
_PARAMS = ("k1", "b", "delta", "method", "idf_method", "dtype", "int_dtype", "backend")


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
        """Write the index to ``directory``: built whole in a new directory beside it, then renamed into place.

        Every file is created new (``O_EXCL``, through :func:`~workbench.dbfiles.guarded_open`), so
        nothing is ever written through a file that was there (a link to the database, say); a
        reader sees the old index or the new one, never a mix. The metadata records each file's
        size, which bounds what :meth:`load` reads.
        """
        import bm25s

        d = Path(directory)
        d.parent.mkdir(parents=True, exist_ok=True)
        bm = self._bm25
        arrays = {"data": bm.scores["data"], "indices": bm.scores["indices"], "indptr": bm.scores["indptr"]}
        if bm.nonoccurrence_array is not None:
            arrays["nonoccurrence"] = bm.nonoccurrence_array
        blobs = {f"{name}.bin": np.ascontiguousarray(a).tobytes() for name, a in arrays.items()}
        blobs[VOCAB_NAME] = json.dumps(bm.vocab_dict, ensure_ascii=False, sort_keys=True).encode("utf-8")
        blobs[IDS_NAME] = json.dumps(self.ids, ensure_ascii=False).encode("utf-8")
        meta = {
            "format": FORMAT_VERSION,
            "mode": self.mode,
            "stopwords": self.stopwords,
            "fingerprint": self.fingerprint,
            "n_docs": len(self.ids),
            "bm25s_version": bm25s.__version__,
            "params": {k: getattr(bm, k) for k in _PARAMS},
            "arrays": {name: [np.asarray(a).dtype.str, int(np.asarray(a).size)] for name, a in arrays.items()},
            "files": {name: len(blob) for name, blob in sorted(blobs.items())},
        }
        blobs[META_NAME] = json.dumps(meta, ensure_ascii=False, sort_keys=True).encode("utf-8")
        if len(blobs[META_NAME]) > META_LIMIT:
            raise ValueError(f"{d}: the index metadata would exceed {META_LIMIT} bytes")
        staging = d.with_name(f".{d.name}.{secrets.token_hex(6)}.new")
        staging.mkdir()
        try:
            for name, blob in blobs.items():   # the metadata last: a directory without it is incomplete
                write_new(staging / name, blob)
            _swap_into_place(staging, d)
        finally:
            if staging.exists():
                shutil.rmtree(staging, ignore_errors=True)
        return d

    @classmethod
    def load(cls, directory: str | os.PathLike, *, mmap: bool = False) -> "BM25Index":
        """The index saved in ``directory``; ``ValueError`` or ``OSError`` when it is incomplete or damaged.

        Each file is read through the guarded open, regular files only, and only up to the size its
        metadata records (itself read within :data:`META_LIMIT`): a file of any other size is damaged
        and is not read at all. ``mmap`` is accepted for compatibility; the arrays are read whole.
        """
        import bm25s

        d = Path(directory)
        meta_path = d / META_NAME
        if not meta_path.exists():
            raise FileNotFoundError(f"{meta_path}: not a saved BM25Index (missing metadata)")
        meta = json.loads(read_regular(meta_path, META_LIMIT + 1, follow=False).decode("utf-8"))
        if not isinstance(meta, dict):
            raise ValueError(f"{meta_path}: not an index's metadata")
        if meta.get("format") != FORMAT_VERSION:
            raise OtherFormat(f"{d}: saved in format {meta.get('format')!r}, this workbench reads {FORMAT_VERSION}")
        files = meta["files"]
        blobs = {name: _read_exactly(d / name, int(size)) for name, size in files.items()}
        arrays = {}
        for name, (dtype, size) in meta["arrays"].items():
            array = np.frombuffer(blobs[f"{name}.bin"], dtype=np.dtype(dtype))
            if array.size != size:
                raise ValueError(f"{d / f'{name}.bin'}: {array.size} values, the metadata says {size}")
            arrays[name] = array
        self = cls.__new__(cls)
        self.mode = meta["mode"]
        self.stopwords = meta["stopwords"]
        self.fingerprint = meta["fingerprint"]
        self.ids = json.loads(blobs[IDS_NAME].decode("utf-8"))
        vocab = json.loads(blobs[VOCAB_NAME].decode("utf-8"))
        n = int(meta["n_docs"])
        indptr = arrays["indptr"]
        if len(self.ids) != n or indptr.size != len(vocab) + 1 or int(indptr[-1]) != arrays["data"].size:
            raise ValueError(f"{d}: the index's files disagree with its metadata ({len(self.ids)} ids for {n} "
                             f"documents, {indptr.size} offsets for {len(vocab)} terms)")
        bm = bm25s.BM25(**meta["params"])
        bm.scores = {"data": arrays["data"], "indices": arrays["indices"], "indptr": indptr, "num_docs": n}
        bm.nonoccurrence_array = arrays.get("nonoccurrence")
        bm.vocab_dict = vocab
        bm.unique_token_ids_set = set(vocab.values())
        self._bm25 = bm
        self._post_init()
        return self


class OtherFormat(ValueError):
    """A saved index of another format (an older workbench's): not damaged, but to be built again."""


def _read_exactly(path: Path, size: int) -> bytes:
    """The bytes of the cache file ``path``, which must be a regular file of exactly ``size`` bytes.

    Its size is looked at on the opened descriptor before anything is read: a file grown or cut
    since (a 2 GiB sparse file put in its place, say) is refused at once, unread.
    """
    data = read_regular(path, size, follow=False, size=size)
    if len(data) != size:
        raise ValueError(f"{path}: cut short while reading ({len(data):,} of {size:,} bytes)")
    return data


def _swap_into_place(staging: Path, target: Path) -> None:
    """Rename the complete ``staging`` directory to ``target``, replacing an older index there."""
    try:
        os.rename(staging, target)
        return
    except OSError:
        if not target.exists() and not target.is_symlink():
            raise
    old = target.with_name(f".{target.name}.{secrets.token_hex(6)}.old")
    os.rename(target, old)          # a link or a file there is moved aside, never followed
    try:
        os.rename(staging, target)
    except OSError:
        if not target.is_dir():     # another process put its own (equal) index there meanwhile: keep it
            raise
    if old.is_dir() and not old.is_symlink():
        shutil.rmtree(old, ignore_errors=True)
    else:
        old.unlink()
