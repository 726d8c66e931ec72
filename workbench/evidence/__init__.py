"""Evidence units, linearization templates, tokenizers, truncation and exact parse."""

from .linearize import FORMATS, linearize, order_units, parse
from .tokenizers import (
    DEFAULT_TOKENIZER,
    TiktokenTokenizer,
    count_tokens,
    Tokenizer,
    get_tokenizer,
    known_prefixes,
    register_tokenizer,
)
from .units import Unit, normalize_text, render_line, triple_key
from .window import Window, select_oracle_path, truncate, truncate_many, uncut

__all__ = [
    "DEFAULT_TOKENIZER",
    "count_tokens",
    "uncut",
    "FORMATS",
    "TiktokenTokenizer",
    "Tokenizer",
    "Unit",
    "Window",
    "get_tokenizer",
    "known_prefixes",
    "linearize",
    "normalize_text",
    "order_units",
    "parse",
    "register_tokenizer",
    "render_line",
    "select_oracle_path",
    "triple_key",
    "truncate",
    "truncate_many",
]
