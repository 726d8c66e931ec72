"""Entity deduplication for KG construction (docs/design.md §8)."""
