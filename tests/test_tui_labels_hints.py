"""The Labels screen's relevance hint names only the steps still missing (issue 54, case 6).

With HowToCook imported, asked questions of and retrieved, the hint still began "after `workbench corpus import
sample_data/howtocook --name hc`": a user who had done it was asked to do it again. The steps are read from the
database (workbench.retrieval.steps), in every state between an empty database and a retrieved corpus.
"""

from __future__ import annotations

from conftest import copy_db
from relevancekit import DATASET, tiny_db
from tuikit import SMALL, until_loaded
from workbench.data.corpus import import_corpus
from workbench.retrieval.evaluate import filename_questions
from workbench.retrieval.steps import relevance_steps
from workbench.store import open_store
from workbench.tui.app import WorkbenchApp
from workbench.tui.screens.label_loads import KINDS



def test_the_steps_to_judged_relevance_are_only_those_not_yet_done(tmp_path):
    recipes = tmp_path / "recipes"
    recipes.mkdir()
    (recipes / "番茄炒蛋.md").write_text("# 番茄炒蛋\n\n鸡蛋打散，番茄切块。先炒蛋，再炒番茄。\n", encoding="utf-8")
    (recipes / "米饭.md").write_text("# 米饭\n\n米洗净，加水，煮二十分钟。\n", encoding="utf-8")
    store = open_store(tmp_path / "steps.db")
    try:
        steps = relevance_steps(store)
        assert steps.dataset is None and steps.commands == (
            "workbench corpus import sample_data/howtocook --name hc", "workbench questions generate hc",
            "workbench retrieve hc", "workbench retrieval judge hc --retriever bm25 --k 5")
        import_corpus(store, recipes, "cook")
        assert relevance_steps(store).commands == (
            "workbench questions generate cook", "workbench retrieve cook",
            "workbench retrieval judge cook --retriever bm25 --k 5")
        filename_questions(store, "cook")
        assert relevance_steps(store).commands == ("workbench retrieve cook",
                                                   "workbench retrieval judge cook --retriever bm25 --k 5")
        assert relevance_steps(store).sentence() == ("in a shell, `workbench retrieve cook`, then `workbench "
                                                     "retrieval judge cook --retriever bm25 --k 5`.")
    finally:
        store.close()


def test_an_imported_chunk_directory_with_retrievals_is_judged_with_its_own_retriever(tmp_path):
    """Retrieved: only the judging is left. Not only of a Markdown corpus: of a directory of chunks with
    retrieval.jsonl too (its own retrievers, bm25 first)."""
    store = open_store(tiny_db(tmp_path / "tiny.db"))
    try:
        steps = relevance_steps(store)
        assert steps.dataset == DATASET
        assert steps.commands == (f"workbench retrieval judge {DATASET} --retriever bm25 --k 5",)
        assert steps.sentence() == f"in a shell, `workbench retrieval judge {DATASET} --retriever bm25 --k 5`."
    finally:
        store.close()


async def test_the_labels_relevance_hint_does_not_ask_to_import_a_corpus_that_is_imported(tmp_path, corpus_template):
    app = WorkbenchApp(copy_db(corpus_template, tmp_path / "hc.db"))
    async with app.run_test(size=SMALL) as pilot:
        await until_loaded(pilot)
        await pilot.press("T")
        screen = await until_loaded(pilot, "labels")
        for _ in KINDS:         # t goes round the kinds: relevance within one round, or never
            if screen.view.kind == "relevance":
                break
            await pilot.press("t")
            await until_loaded(pilot, "labels")
        assert screen.view.kind == "relevance"
        card = " ".join(str(screen.query_one("#card").render()).split())
        assert "No chunk relevance judged yet: in a shell, `workbench retrieval judge hc --retriever bm25 --k 5`." \
            in card
        assert "corpus import" not in card and "questions generate" not in card and "workbench retrieve " not in card
