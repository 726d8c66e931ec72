"""Multi-step systems under test (docs/design.md §7): SearChain."""
