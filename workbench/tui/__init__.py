"""The Textual app: a thin keyboard-first layer over the core (no SQL, no llama.cpp here)."""
