"""Claim decomposition and atomic verification (docs/design.md §6)."""
