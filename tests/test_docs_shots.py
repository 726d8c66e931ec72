"""scripts/docs_shots.py and scripts/screen_picture.py: the docs' pictures of the app, and how a browser draws them.

A screen is read as a grid of cells and drawn cell by cell by headless Chromium, so a browser shows it as the
terminal does: a Chinese character two cells wide, nothing overlapping, no box for a glyph a font lacks.
A tiny database stands in for the demo's (no model: the answers are imported, their claims checked by the
rule decomposer and the lexical verifier), so the demo is not needed. The test that the built site shows
what the app draws now is in tests/test_docs_site.py, beside the site it builds.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.cells import get_character_cell_size
from rich.segment import Segment
from rich.style import Style

from workbench.claims.runner import ClaimsConfig, run_claims
from workbench.data.importer import import_dataset
from workbench.data.predictions import import_predictions
from workbench.runs.sweep import SweepConfig, plan_sweep
from workbench.store import open_store
from workbench.store.queries import get_run

from conftest import load_script, write_jsonl

screen_picture = load_script("screen_picture")
CHROMIUM = screen_picture.chromium()
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (.ci/run installs it)")
CJK_QUESTION = "如何做冰粉？"


def build_tiny_demo(folder: Path) -> Path:
    """A run named ``demo`` over three questions (one in Chinese), with oracle cells, every answer imported and
    wrong, and the answers' claims checked: every screen the docs show has something to show."""
    data = folder / "tiny"
    data.mkdir(parents=True)
    kb = [["Kismet", "directed_by", "William Dieterle"], ["Kismet", "starred_actors", "Marlene Dietrich"],
          ["Kismet", "release_year", "1944"], ["冰粉", "ingredient", "冰粉籽"]]
    write_jsonl(data / "kb.jsonl", [{"triple": t} for t in kb])
    write_jsonl(data / "samples.jsonl", [
        {"id": "q1", "question": "who directed Kismet", "answers": ["William Dieterle"], "gold_paths": [[kb[0]]]},
        {"id": "q2", "question": "who directed the films starring Marlene Dietrich", "answers": ["William Dieterle"],
         "gold_paths": [[kb[1], kb[0]]]},
        {"id": "q3", "question": CJK_QUESTION, "answers": ["冰粉籽"], "gold_paths": [[kb[3]]]},
    ])
    write_jsonl(data / "retrieval.jsonl", [
        {"sample_id": "q1", "retriever": "bm25", "results": [{"triple": kb[2], "score": 3.0},
                                                              {"triple": kb[0], "score": 2.0}]},
        {"sample_id": "q2", "retriever": "bm25", "results": [{"triple": kb[1], "score": 3.0},
                                                              {"triple": kb[0], "score": 1.0}]},
        {"sample_id": "q3", "retriever": "bm25", "results": [{"triple": kb[3], "score": 1.0}]},
    ])
    db = folder / "tiny.db"
    store = open_store(db)
    try:
        import_dataset(store, data, "tiny")
        plan_sweep(store, SweepConfig(ks=(1, 5), budgets=(128,), formats=("linear",), oracle=True, shuffles=1),
                   name="demo")
        run = get_run(store, "demo")
        cells = [r[0] for r in store.conn.execute("SELECT cell_id FROM cells WHERE cell_id NOT LIKE 'oracle%'")]
        answers = [{"sample_id": q, "cell_id": c, "prediction": "Marlene Dietrich"} for q in ("q1", "q2", "q3")
                   for c in cells]
        import_predictions(store, run, write_jsonl(folder / "answers.jsonl", answers))
        run_claims(store, run, ClaimsConfig(decomposer="rule", verifiers=("lexical",)))
    finally:
        store.close()
    return db


@pytest.fixture(scope="module")
def tiny_demo(tmp_path_factory) -> Path:
    return build_tiny_demo(tmp_path_factory.mktemp("tiny-demo"))


def _cell(char: str, fg: str = "#ffffff", bg: str = "#000000", width: int = 1):
    return screen_picture.Cell(char, fg, bg, width=width)


def test_a_wide_character_fills_two_cells_and_the_next_character_keeps_its_column():
    grid = screen_picture.grid_of_lines([[Segment("a如b", Style(color="#ff0000"))]], width=6, height=2)
    first = grid.rows[0]
    assert [c.char if c else None for c in first] == ["a", "如", None, "b", " ", " "]
    assert first[1].width == 2 and first[1].fg == "#ff0000"
    assert grid.text().splitlines() == ["a如b  ", "      "]       # every row as wide as the screen
    page = screen_picture.to_html(grid)
    # Every character is placed at its own column: "b" after the wide character at column 3, not 2.
    assert f'data-w="{2 * screen_picture.CELL_W}" style="left:{screen_picture.CELL_W}px;top:0px">如' in page
    assert f'style="left:{3 * screen_picture.CELL_W}px;top:0px">b' in page


def test_a_wide_character_cut_by_the_right_edge_leaves_a_blank_cell():
    grid = screen_picture.grid_of_lines([[Segment("abc如")]], width=4, height=1)
    assert grid.text() == "abc "


def test_a_character_no_installed_font_draws_is_named():
    private_use = "\ue000"  # no font draws the private use area
    assert private_use in screen_picture.missing_glyphs({private_use, "a"})


@needs_chromium
def test_the_fonts_ci_installs_draw_chinese_box_drawing_braille_and_the_header_icon():
    """What the app's screens hold: Chinese (HowToCook), lines and corners, the plots' braille, ⭘."""
    assert screen_picture.missing_glyphs(set("如何做冰粉？─│┌┐└┘━▁▔▎⣿⠁✔✘⭘…→●")) == []


@needs_chromium
def test_in_chromium_each_chinese_character_sits_in_its_two_cells_and_no_glyph_overlaps_the_next(tmp_path):
    text = f"q3 {CJK_QUESTION} ⭘ ─┼─ ⣿ 0.800 480/480"
    row = []
    for char in text:
        wide = get_character_cell_size(char) == 2
        row += [_cell(char, width=2), None] if wide else [_cell(char)]
    grid = screen_picture.Grid(len(row), (tuple(row),))
    page = tmp_path / "row.html"
    page.write_text(screen_picture.to_html(grid), encoding="utf-8")
    with screen_picture.Chromium(CHROMIUM) as browser:
        browser.open(page.as_uri(), grid.width * screen_picture.CELL_W, screen_picture.CELL_H)
        boxes = browser.evaluate("[...document.querySelectorAll('#screen i')].map(g => {"
                                 " const r = g.getBoundingClientRect();"
                                 " return [g.textContent, r.left, r.right, Number(g.dataset.w)]; })")
    columns = [x for x, cell in enumerate(row) if cell is not None and not cell.char.isspace()]
    assert [box[0] for box in boxes] == [row[x].char for x in columns]
    for (char, left, right, width), x in zip(boxes, columns):
        start = x * screen_picture.CELL_W
        # Within its own cells (half a pixel of anti-aliasing aside): never over its neighbour's.
        assert start - 0.5 <= left and right <= start + width + 0.5, (char, left, right, start, width)
        if char in CJK_QUESTION:
            assert width == 2 * screen_picture.CELL_W and right - left > screen_picture.CELL_W, char


def test_only_the_chosen_pictures_are_written_and_the_figures_again_byte_for_byte(tiny_demo, tmp_path, capsys):
    """The figures need no browser. (What the screens' pictures show: tests/test_docs_site.py, on the build's.)"""
    out, again = tmp_path / "shots", tmp_path / "again"
    for folder in (out, again):
        assert load_script("docs_shots").main(["--db", str(tiny_demo), "--out", str(folder), "--only", "figures"]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["ledger-main.svg", "ledger-oracle.svg"]
    for name in ("ledger-main.svg", "ledger-oracle.svg"):
        figure = (out / name).read_text(encoding="utf-8")
        assert figure.lstrip().startswith(("<svg", "<?xml")), name
        # The report's figures draw their text as paths: no font to miss, nothing fetched.
        assert "<path" in figure and "<text" not in figure and "url(\"http" not in figure, name
        assert (again / name).read_bytes() == (out / name).read_bytes(), name   # reproducible
    printed = capsys.readouterr().out
    assert f"wrote {out / 'ledger-main.svg'}" in printed and f"wrote {out / 'ledger-oracle.svg'}" in printed


def test_a_missing_database_or_demo_run_exits_2_naming_the_database(tmp_path, capsys):
    script = load_script("docs_shots")
    missing = tmp_path / "none.db"
    assert script.main(["--db", str(missing), "--out", str(tmp_path / "shots")]) == 2
    err = capsys.readouterr().err
    assert str(missing) in err and "just demo" in err and len(err.strip().splitlines()) == 1
    assert not missing.exists() and not (tmp_path / "shots").exists()   # nothing created

    empty = tmp_path / "empty.db"
    open_store(empty).close()
    assert script.main(["--db", str(empty), "--out", str(tmp_path / "shots")]) == 2
    err = capsys.readouterr().err
    assert str(empty) in err and "no run named 'demo'" in err and "just demo" in err


def test_without_chromium_the_screens_are_refused_in_one_line(tiny_demo, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(screen_picture, "chromium", lambda: None)
    assert load_script("docs_shots").main(["--db", str(tiny_demo), "--out", str(tmp_path / "shots")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("docs_shots: chromium is not installed") and "apt-get install chromium" in err
    assert len(err.splitlines()) == 1 and not (tmp_path / "shots").exists()
