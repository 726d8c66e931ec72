"""Retrieval: BM25 (bm25s) and dense retrieval over a dataset's units, retrieval runs and their evaluation.

Import the modules themselves (``retrieval.bm25``, ``retrieval.text``, ...): this package
re-exports nothing, so naming ``retrieval.text`` (as the CLI's claims verbs do, through
the vote) does not load numpy and bm25s.
"""
