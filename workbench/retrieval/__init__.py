"""Lexical retrieval: BM25 (bm25s) with Chinese-aware tokenizers (docs/design.md §5)."""

from workbench.retrieval.bm25 import BM25Index, fingerprint, triple_docs, triple_text
from workbench.retrieval.text import detect_mode, tokenize

__all__ = ["BM25Index", "detect_mode", "fingerprint", "tokenize", "triple_docs", "triple_text"]
