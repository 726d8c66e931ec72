"""Multi-step systems under test (DESIGN §7): SearChain."""
