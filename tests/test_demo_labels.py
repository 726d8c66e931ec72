"""The demo's judge section is fixed data: recorded answers, their claims, the shipped labels.

`just demo` imports `sample_data/labels/demo-answers.jsonl` into a run planned like its sweep,
verifies the claims without a model and imports `demo-claims.jsonl`. Everything in
`judge report claims recorded` then follows from files, so it prints the same on every CPU;
this is that report, computed here as the demo computes it.
"""

from __future__ import annotations

from conftest import REPO, SAMPLE_METAQA
from workbench.cli import main
from workbench.data.importer import import_dataset
from workbench.store import open_store

LABELS = REPO / "sample_data" / "labels"


def test_the_shipped_labels_apply_to_the_recorded_answers_and_the_report_is_the_readmes(tmp_path, capsys):
    db = tmp_path / "demo.db"
    store = open_store(db)
    import_dataset(store, SAMPLE_METAQA, "metaqa")
    store.close()
    cli = lambda *argv: main(["--db", str(db), *argv])  # noqa: E731
    assert cli("sweep", "metaqa", "--limit", "3", "--k", "1,2,5,10,20", "--budget", "32,64,128", "--format", "linear",
               "--oracle", "--shuffles", "2", "--name", "recorded") == 0
    assert cli("predictions", "import", str(LABELS / "demo-answers.jsonl"), "recorded") == 0
    assert cli("claims", "run", "recorded", "--decomposer", "rule", "--verifiers", "lexical") == 0
    capsys.readouterr()
    assert cli("judge", "labels", "import", str(LABELS / "demo-claims.jsonl")) == 0
    assert "40 labels · 40 added" in capsys.readouterr().err
    assert cli("judge", "report", "claims", "recorded") == 0
    report = capsys.readouterr().out
    assert "88 claims · 40 labelled (40 from the uniform queue) · 40 labels by ana 40" in report
    assert "lexical  40  12   5   0  23     0.875  0.734 [0.500,0.937]   0.700   0.575     0.575" in report
    assert "lexical        40  88  0.625 [0.524,0.726]  0.575 [0.422,0.728]  0.520 [0.392,0.649]  0.397" in report
    assert "not used" not in report and "stale" not in report
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    # The README prints exactly this, under its header (there the demo's own claim run is number 1).
    assert "judges of recorded · claim run 2 (rule decomposer; lexical)" in readme
    assert report.split("\n", 1)[1].strip() in readme
