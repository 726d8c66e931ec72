"""scripts/docs_shots.py: the screenshots and figures it writes, and its refusal of a database without the demo run.

A tiny database stands in for the demo's (no model: the answers are imported), so the demo is not needed.
"""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest

from workbench.data.importer import import_dataset
from workbench.data.predictions import import_predictions
from workbench.runs.sweep import SweepConfig, plan_sweep
from workbench.store import open_store
from workbench.store.queries import get_run

from conftest import load_script, write_jsonl


@pytest.fixture
def tiny_demo(tmp_path, tiny_dir) -> Path:
    """The tiny dataset swept as a run named ``demo`` (with oracle cells), every answer imported and wrong."""
    db = tmp_path / "tiny.db"
    store = open_store(db)
    import_dataset(store, tiny_dir, "tiny")
    plan_sweep(store, SweepConfig(ks=(1, 5), budgets=(128,), formats=("linear",), oracle=True, shuffles=1),
               name="demo")
    cells = [r[0] for r in store.conn.execute("SELECT cell_id FROM cells WHERE cell_id NOT LIKE 'oracle%'")]
    answers = [{"sample_id": q, "cell_id": c, "prediction": "Marlene Dietrich"} for q in ("q1", "q2", "q3")
               for c in cells]
    import_predictions(store, get_run(store, "demo"), write_jsonl(tmp_path / "answers.jsonl", answers))
    store.close()
    return db


SHOTS = Path(__file__).resolve().parents[1] / "docs" / "shots"
CJK_MONO = ("Noto Sans Mono CJK SC", "Sarasa Mono SC", "Source Han Mono")


def _text_families(svg: str) -> list[list[str]]:
    """The font families of each rule that sets a screenshot's text (Rich's ``-matrix`` class), in order."""
    return [[family.strip().strip('"') for family in m.group(1).split(",")]
            for m in re.finditer(r"-matrix \{[^}]*?font-family: ([^;]+);", svg)]


def _names_cjk_after_fira_code(svg: str) -> bool:
    """Whether every text rule of the screenshot names Fira Code first, then a CJK monospace family, before
    the generic fallback (else Chinese shows as boxes where the system's monospace has no CJK glyphs)."""
    rules = _text_families(svg)
    return bool(rules) and all(
        families[0] == "Fira Code" and families[-1] == "monospace" and any(f in CJK_MONO for f in families[1:-1])
        for families in rules)


def _text(svg: Path) -> str:
    """What an SVG screenshot reads: its text without the tags (a row is one text element per style)."""
    return html.unescape(re.sub(r"<[^>]+>", "", svg.read_text(encoding="utf-8"))).replace("\xa0", " ")


def test_only_the_chosen_screens_and_the_figures_are_written(tiny_demo, tmp_path, capsys):
    out = tmp_path / "shots"
    assert load_script("docs_shots").main(["--db", str(tiny_demo), "--out", str(out), "--only", "samples,detail,figures"]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["detail.svg", "ledger-main.svg", "ledger-oracle.svg",
                                                     "samples.svg"]
    for svg in out.iterdir():
        text = svg.read_text(encoding="utf-8")
        assert text.lstrip().startswith(("<svg", "<?xml")), svg.name
        assert "url(\"http" not in text, svg.name   # no web font: the docs fetch nothing
    for name in ("samples.svg", "detail.svg"):
        assert _names_cjk_after_fira_code((out / name).read_text(encoding="utf-8")), name
    samples = _text(out / "samples.svg")
    assert "Dissipation Workbench — Samples" in samples and "Samples demo · cell k1-b128-linear" in samples
    detail = _text(out / "detail.svg")
    assert "Dissipation Workbench — Sample detail" in detail
    assert "Gold paths" in detail and "Marlene Dietrich" in detail     # the sample and its (imported) answer
    again = tmp_path / "again"
    assert load_script("docs_shots").main(["--db", str(tiny_demo), "--out", str(again), "--only", "figures"]) == 0
    for name in ("ledger-main.svg", "ledger-oracle.svg"):   # reproducible: a rerun changes no byte
        assert (again / name).read_bytes() == (out / name).read_bytes()
    printed = capsys.readouterr().out
    assert all(f"wrote {out / name}" in printed for name in ("samples.svg", "detail.svg", "ledger-main.svg"))


def test_a_missing_database_or_demo_run_exits_2_naming_the_database(tmp_path, capsys):
    script = load_script("docs_shots")
    missing = tmp_path / "none.db"
    assert script.main(["--db", str(missing), "--out", str(tmp_path / "shots")]) == 2
    err = capsys.readouterr().err
    assert str(missing) in err and "just demo" in err
    assert not missing.exists() and not (tmp_path / "shots").exists()   # nothing created

    empty = tmp_path / "empty.db"
    open_store(empty).close()
    assert script.main(["--db", str(empty), "--out", str(tmp_path / "shots")]) == 2
    err = capsys.readouterr().err
    assert str(empty) in err and "no run named 'demo'" in err and "just demo" in err


def test_every_screenshot_in_the_docs_names_a_cjk_family_after_fira_code():
    screenshots = [svg for svg in sorted(SHOTS.glob("*.svg")) if "rich-terminal" in svg.read_text(encoding="utf-8")]
    assert len(screenshots) >= 5, screenshots
    for svg in screenshots:
        assert _names_cjk_after_fira_code(svg.read_text(encoding="utf-8")), svg.name


def test_the_figures_in_the_docs_draw_their_text_as_paths_so_need_no_font():
    for name in ("ledger-main.svg", "ledger-oracle.svg"):
        figure = (SHOTS / name).read_text(encoding="utf-8")
        assert "<path" in figure and "<text" not in figure and "font-family" not in figure, name
