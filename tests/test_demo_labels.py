"""The demo's judge section is fixed data: recorded answers, their claims, the shipped labels.

`just demo` imports `sample_data/labels/demo-answers.jsonl` into a run planned like its sweep,
verifies the claims without a model and imports `demo-claims.jsonl`. Everything in
`judge report claims recorded` then follows from files, so it prints the same on every CPU;
this is that report, computed here as the demo computes it, and the docs page that shows it.

The embedding verifier's vectors (multilingual-e5-small, real) come from the session's pool
(tests/outputcache.py): the scenario ``demo-claims`` runs the demo's claim run once per session,
and the docs database (tests/test_docs_examples.py) is seeded from it too.
"""

from __future__ import annotations

from pathlib import Path

from conftest import REPO, SAMPLE_METAQA, load_script
from workbench.cli import main
from workbench.data.importer import import_dataset
from workbench.store import open_store

LABELS = REPO / "sample_data" / "labels"
DEMO_CLAIMS = "demo-claims"
# The demo's steps up to its claim run, as `just demo` (and scripts/docs_examples.py's SETUP) runs them.
DEMO_STEPS = (
    ["sweep", "metaqa", "--limit", "3", "--k", "1,2,5,10,20", "--budget", "32,64,128", "--format", "linear",
     "--oracle", "--shuffles", "2", "--name", "recorded"],
    ["predictions", "import", str(LABELS / "demo-answers.jsonl"), "recorded"],
    ["claims", "run", "recorded", "--decomposer", "rule", "--verifiers", "lexical,embedding"],
)


def run_demo_claims(db: Path) -> None:
    """MetaQA imported into ``db``, then the demo's sweep, its recorded answers and their claim run (rule +
    lexical + embedding)."""
    store = open_store(db)
    import_dataset(store, SAMPLE_METAQA, "metaqa")
    store.close()
    for argv in DEMO_STEPS:
        assert main(["--db", str(db), *argv]) == 0


def test_the_shipped_labels_apply_to_the_recorded_answers_and_the_report_is_the_docs(tmp_path, capsys,
                                                                                      shared_outputs):
    shared_outputs.scenario(DEMO_CLAIMS, run_demo_claims)
    db = tmp_path / "demo.db"
    shared_outputs.seed(db)
    capsys.readouterr()
    run_demo_claims(db)
    assert "embedding: 0 texts embedded" in capsys.readouterr().err      # every vector from the pool
    cli = lambda *argv: main(["--db", str(db), *argv])  # noqa: E731
    assert cli("judge", "labels", "import", str(LABELS / "demo-claims.jsonl")) == 0
    assert "40 labels · 40 added" in capsys.readouterr().err
    assert cli("judge", "report", "claims", "recorded") == 0
    report = capsys.readouterr().out
    assert "88 claims · 40 labelled (40 from the uniform queue) · 40 labels by ana 40" in report
    lexical = [line for line in report.splitlines() if line.startswith("lexical ")]
    assert lexical == [
        "lexical    40  12   5   0  23     0.875  0.734 [0.500,0.937]   0.700   0.575     0.575",
        "lexical          40  88  0.625 [0.524,0.726]  0.575 [0.422,0.728]  0.520 [0.392,0.649]  0.397"]
    # all-MiniLM-L6-v2's verdicts come from floats the CPU sums: only that it judged all 40 is asserted.
    assert any(line.startswith("embedding  40  ") for line in report.splitlines())
    assert "not used" not in report and "stale" not in report
    page = (REPO / "docs" / "judges.md").read_text(encoding="utf-8")
    # "Trusting the judges" prints this report as the demo printed it (there the demo's own claim run is
    # number 1): every line but the embedding verifier's and the vote's (which follows it) is exact on
    # every CPU. (tests/test_docs_examples.py checks the page's block with its figures masked.)
    assert "judges of recorded · claim run 2 (rule decomposer; lexical, embedding)" in page
    # The page lays the report out as scripts/console_layout.py does (a prose line folded, a wide table shown in
    # groups of columns, each with its row labels): every laid-out line but the embedding verifier's and the
    # vote's is on the page as it is.
    laid_out = load_script("console_layout").layout([line.rstrip() for line in report.splitlines()[1:]])
    exact = [line for line in laid_out if not line.startswith(("embedding ", "vote "))]
    for line in exact:
        assert line in page, line
