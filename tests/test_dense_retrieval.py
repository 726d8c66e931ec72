"""Dense and hybrid retrieval with the shipped embedding model (multilingual-e5-small, run by llama.cpp).

No model argument is needed. Vectors are kept in the store by (model, text as embedded): a second
run embeds nothing, a changed corpus embeds only the units whose text changed, and another model
(all-MiniLM-L6-v2, by name) embeds for itself without touching the first model's vectors.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from workbench.cli import main
from workbench.data.corpus import import_corpus
from workbench.models.base import ModelError
from workbench.models import embedder as embedder_module
from workbench.models.embedder import CachedEmbedder, Embedder
from workbench.models.locate import default_model_path
from workbench.retrieval.dense import cosine_top_k, reciprocal_rank_fusion
from workbench.retrieval.evaluate import evaluate_retrieval, filename_questions
from workbench.retrieval.runs import retrieve

DISHES = {"红烧肉": "五花肉 冰糖 老抽 炖煮一小时", "冰粉": "冰粉粉 红糖水 山楂 冷藏", "热干面": "碱水面 芝麻酱 萝卜干",
          "番茄炒蛋": "番茄 鸡蛋 葱花 白糖"}


@pytest.fixture(scope="module", autouse=True)
def each_model_loaded_once():
    """Each embedding model this module uses is loaded by llama.cpp once, by the first pass that needs it, and
    serves every later pass of the module (as one model serves a long-lived process's passes): e5's load reads
    a 250,002-piece vocabulary, a second or more of CPU each time, and the module's passes made seven. Every
    pass still resolves, checks and hashes its model as always, and embeds with a real one."""
    loaded: dict[tuple, tuple[Embedder, object]] = {}

    def once(path, **options):
        key = (str(path), options.get("n_threads"), options.get("n_gpu_layers"))
        if key not in loaded:
            model = Embedder(path, **options)
            loaded[key] = (model, model.close)
            model.close = lambda: None     # a pass's close leaves it for the next pass
        return loaded[key][0]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(embedder_module, "Embedder", once)
        yield
    for _, close in loaded.values():
        close()


def _corpus(root, dishes=DISHES):
    folder = root / "dishes" / "x"
    folder.mkdir(parents=True, exist_ok=True)
    for path in folder.iterdir():
        path.unlink()
    for name, body in dishes.items():
        (folder / f"{name}.md").write_text(f"# {name}的做法\n\n{body}\n", encoding="utf-8")
    return root


def test_reciprocal_rank_fusion_adds_one_over_sixty_plus_rank():
    fused = reciprocal_rank_fusion([["a", "b", "c"], ["c", "a"]], k=3)
    assert [d for d, _ in fused] == ["a", "c", "b"]
    assert fused[0][1] == pytest.approx(1 / 61 + 1 / 62)
    assert fused[1][1] == pytest.approx(1 / 63 + 1 / 61)
    assert fused[2][1] == pytest.approx(1 / 62)
    # Equal scores: the id met first (best rank, then the first ranking) wins.
    assert [d for d, _ in reciprocal_rank_fusion([["x", "y"], ["y", "x"]], k=2)] == ["x", "y"]


def test_cosine_top_k_is_exact_and_breaks_ties_by_position():
    vectors = np.array([[1, 0], [0, 1], [1, 0]], dtype=np.float32)
    (ranked,) = cosine_top_k(np.array([[1, 0]], dtype=np.float32), vectors, ["u0", "u1", "u2"], 2)
    assert ranked == [("u0", 1.0), ("u2", 1.0)]


@pytest.mark.real_model
def test_dense_and_hybrid_need_no_model_argument_and_a_rerun_embeds_nothing(store, tmp_path):
    import_corpus(store, _corpus(tmp_path / "corpus"), "hc")
    filename_questions(store, "hc")
    dense = retrieve(store, "hc", k=3, retriever="dense")
    assert dense.retriever == "dense" and dense.method == "dense" and dense.index_dir is None
    assert dense.embedded == 4 + 4 and dense.cached == 0        # four chunks, four questions
    assert dense.embedding_model.endswith(".gguf") and "multilingual-e5-small" in dense.embedding_model
    again = retrieve(store, "hc", k=3, retriever="dense")
    assert again.unchanged and again.embedded == 0 and again.cached == 8
    hybrid = retrieve(store, "hc", k=3, retriever="hybrid")
    assert hybrid.method == "hybrid" and hybrid.embedded == 0 and hybrid.index_dir is not None
    for name in ("dense", "hybrid"):
        result = evaluate_retrieval(store, "hc", name, ks=(1, 3), resamples=50)
        assert 0.0 <= result.levels["doc"]["overall"][("recall", 3)].value <= 1.0
    stored = store.conn.execute("SELECT scores FROM retrievals WHERE retriever = 'hybrid' LIMIT 1").fetchone()[0]
    assert max(json.loads(stored)) <= 2 / 61 + 1e-12                    # RRF scores, not cosines


@pytest.mark.real_model
def test_a_changed_corpus_embeds_only_its_changed_units(store, tmp_path):
    root = _corpus(tmp_path / "corpus")
    import_corpus(store, root, "hc")
    filename_questions(store, "hc")
    retrieve(store, "hc", k=2, retriever="dense")
    changed = dict(DISHES, 冰粉="冰粉粉 红糖水 山楂 葡萄干 冷藏两小时")
    import_corpus(store, _corpus(root, changed), "hc", replace=True)
    filename_questions(store, "hc")
    report = retrieve(store, "hc", k=2, retriever="dense", replace=True)
    assert report.embedded == 1 and report.cached == 7


@pytest.mark.real_model
def test_each_model_keeps_its_own_vectors_and_e5_reads_a_long_text_whole(store):
    """e5 embeds a query and a passage differently (its prefixes), and a text past its 512-token window
    window by window; MiniLM, asked by name, cuts it and adds no prefix. Neither sees the other's vectors."""
    long_text = "  " + "红烧肉要先焯水，再用冰糖炒出糖色。" * 60 + "\n"
    e5, minilm = CachedEmbedder(store), CachedEmbedder(store, "all-minilm-l6-v2")
    try:
        query, passage = e5.vectors([long_text], role="query")[0], e5.vectors([long_text], role="passage")[0]
        assert float(query @ passage) < 0.9999 and e5.embedded == 2
        assert minilm.vectors([long_text], role="query").shape == (1, 384)
        assert minilm.vectors([long_text], role="passage").shape == (1, 384) and minilm.embedded == 1
        rows = dict(store.conn.execute("SELECT model, count(*) FROM embeddings GROUP BY model").fetchall())
        assert rows == {e5.model_id: 2, minilm.model_id: 1}
        kept = {m: (tokens, cut) for m, tokens, cut in
                store.conn.execute("SELECT model, max(tokens), max(truncated) FROM embeddings GROUP BY model")}
        assert kept[e5.model_id][0] > 512 and kept[e5.model_id][1] == 0       # every window counted
        assert kept[minilm.model_id] == (256, 1)                              # cut at its window
        assert e5.spec.text(long_text, "passage") == "passage: " + long_text.strip()
    finally:
        e5.close()
        minilm.close()


@pytest.mark.real_model
def test_dense_retrieval_over_kg_triples(store, tiny_dir):
    """A KG's triples are embedded as their ``h | r | t`` lines, each once, and the questions once
    (the five-triple movie KB: what holds for it holds for MetaQA's 5,270, at a fraction of the cost)."""
    from workbench.data.importer import import_dataset

    import_dataset(store, tiny_dir, "tiny")
    units = store.conn.execute("SELECT count(*) FROM units u JOIN datasets d ON d.id = u.dataset_id"
                               " WHERE d.name = 'tiny'").fetchone()[0]
    samples = store.conn.execute("SELECT count(*) FROM samples").fetchone()[0]
    assert units >= 5 and samples == 3
    report = retrieve(store, "tiny", k=5, retriever="dense")
    assert report.queries == samples and report.embedded + report.cached == units + samples
    assert retrieve(store, "tiny", k=5, retriever="dense").embedded == 0


@pytest.mark.real_model
def test_the_cli_says_what_was_embedded_and_refuses_a_chat_model(store, tmp_path, capsys):
    import_corpus(store, _corpus(tmp_path / "corpus"), "hc")
    filename_questions(store, "hc")
    db = str(store.path)
    assert main(["--db", db, "retrieve", "hc", "--retriever", "hybrid", "--k", "3"]) == 0
    out = capsys.readouterr().out
    assert "retriever hybrid (hybrid;" in out and "embedded 8 texts, 0 from the cache" in out
    assert main(["--db", db, "retrieve", "hc", "--retriever", "dense", "--k", "3"]) == 0
    assert "embedded 0 texts, 8 from the cache" in capsys.readouterr().out
    before = store.conn.execute("SELECT count(*) FROM retrievals").fetchone()[0]
    assert main(["--db", db, "retrieve", "hc", "--retriever", "dense", "--name", "chat",
                 "--embedding-model", str(default_model_path())]) == 2
    err = capsys.readouterr().err
    assert "not an embedding model" in err and err.count("\n") == 1
    assert store.conn.execute("SELECT count(*) FROM retrievals").fetchone()[0] == before


def test_a_missing_embedding_model_is_refused_before_anything_is_written(store, tmp_path):
    import_corpus(store, _corpus(tmp_path / "corpus"), "hc")
    filename_questions(store, "hc")
    with pytest.raises(ModelError, match="nope"):
        retrieve(store, "hc", retriever="dense", embedding_model=str(tmp_path / "nope"))
    assert store.conn.execute("SELECT count(*) FROM embeddings").fetchone()[0] == 0
