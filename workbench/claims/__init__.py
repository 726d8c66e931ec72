"""Claim decomposition and atomic verification (DESIGN §6, seed 003)."""
