"""Entity deduplication for KG construction (DESIGN §8, seed 004)."""
