"""Generation backends: llama.cpp in-process (default) and OpenAI-compatible HTTP."""
