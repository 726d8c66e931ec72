"""The one-file HTML report: self-contained, offline, and what a reviewer needs to see.

Built on a model-free sweep with scores and tags written through the real store, so every
section has something to show. Where Debian's chromium is installed (``.ci/run`` installs it),
the page is rendered headless and the screenshot must not be blank.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from xml.etree import ElementTree

import numpy as np
import pytest

from workbench.cli import main
from workbench.report import CASE_QUADRANTS, build_report
from workbench.store import open_store
from workbench.store.queries import get_run
from workbench.triage import add_tag, set_note

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture
def scored_db(swept_db):
    """The swept MetaQA run with a score on every job (right when the gold was visible), one tagged sample."""
    store = open_store(swept_db)
    run = get_run(store, "sweep")
    store.conn.execute("UPDATE events SET score = h_vis, prediction = 'an answer', status = 'done' WHERE run_id = ?",
                       (run.id,))
    store.conn.execute("UPDATE events SET score = 1 - score WHERE run_id = ? AND sid % 7 = 0", (run.id,))
    add_tag(store, run.dataset_id, 3, "annotation-error")
    set_note(store, run.dataset_id, 3, "gold answer is outdated")
    store.close()
    return swept_db


def external_references(page: str) -> list[str]:
    """Every address the page would fetch or link to: http(s), protocol-relative or file URLs, @import, and url()
    other than a reference into the page itself (an SVG clip path's ``url(#id)``)."""
    return re.findall(r"(?:https?:|file:)?//[\w.-]+\.[a-z]{2,}|@import|url\((?!#)", page, flags=re.I)


def test_the_report_holds_every_section_and_references_nothing_outside_itself(scored_db):
    store = open_store(scored_db)
    page = build_report(store, get_run(store, "sweep"))
    store.close()
    assert external_references(page) == []
    assert "<script" not in page and "<link" not in page and "<img" not in page
    for heading in ("The run", "Figures", "Ledger", "Retrieval and interface", "Reasoning, dissipation and leakage",
                    "Oracle controls (only p*)", "Triage", "Cases"):
        assert f">{heading}<" in page, heading
    assert page.count("<svg") == 2  # the K sweep (one format) and the oracle figure, inline
    assert "<summary>Manifest</summary>" in page and "samples" in page  # what the run was planned with
    assert "gold answer is outdated" in page and "annotation-error" in page
    for quadrant in CASE_QUADRANTS:
        assert f"<h3>{quadrant} " in page
    assert page.count("<details>") >= 4  # the configuration and some cases, collapsed


def test_every_inline_figure_is_well_formed_svg(scored_db):
    store = open_store(scored_db)
    page = build_report(store, get_run(store, "sweep"))
    store.close()
    for svg in re.findall(r"<svg.*?</svg>", page, flags=re.S):
        # An HTML parser needs no namespace; an XML parser does: add it back to parse the figure.
        root = ElementTree.fromstring(svg.replace("<svg", '<svg xmlns="http://www.w3.org/2000/svg" '
                                                          'xmlns:xlink="http://www.w3.org/1999/xlink"', 1))
        assert root.tag.endswith("svg") and len(list(root.iter())) > 50


def test_the_ledger_numbers_in_the_report_are_the_ledgers(scored_db):
    from workbench.runs.report import run_ledger

    store = open_store(scored_db)
    run = get_run(store, "sweep")
    page = build_report(store, run)
    row = run_ledger(store, run).rows[0]
    store.close()
    est = row["S_llm"]
    assert f"{est.value:.3f}<br><span class=\"ci\">[{est.lo:.3f}, {est.hi:.3f}]</span>" in page


def test_report_with_compare_adds_the_comparison_and_its_flips(scored_db):
    store = open_store(scored_db)
    run = get_run(store, "sweep")
    page = build_report(store, run, compare_with="sweep")
    store.close()
    assert ">Compared with sweep<" in page and "B − A with a 95% paired bootstrap CI" in page


def test_the_report_verb_writes_the_file_and_refuses_a_missing_directory(scored_db, tmp_path, capsys):
    out = tmp_path / "report.html"
    assert main(["--db", str(scored_db), "report", "sweep", "--out", str(out), "--cases", "1"]) == 0
    assert out.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert main(["--db", str(scored_db), "report", "sweep", "--out", str(tmp_path / "no" / "r.html")]) == 2
    assert "directory does not exist" in capsys.readouterr().err


def test_plot_out_writes_svg_and_png_images(scored_db, tmp_path):
    svg, png = tmp_path / "main.svg", tmp_path / "oracle.png"
    assert main(["--db", str(scored_db), "plot", "sweep", "--out", str(svg)]) == 0
    assert main(["--db", str(scored_db), "plot", "sweep", "--oracle", "--out", str(png)]) == 0
    assert ElementTree.parse(svg).getroot().tag == "{http://www.w3.org/2000/svg}svg"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed here (.ci/run installs it): "
                                              "the report's headless screenshot is not checked")
def test_a_headless_browser_renders_the_report(scored_db, tmp_path):
    from matplotlib.image import imread

    page, shot = tmp_path / "report.html", tmp_path / "report.png"
    assert main(["--db", str(scored_db), "report", "sweep", "--out", str(page)]) == 0
    # No network for the browser: the page must not need one.
    subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    "--proxy-server=127.0.0.1:9", "--window-size=1200,1600", f"--screenshot={shot}",
                    page.as_uri()], check=True, capture_output=True, timeout=120)
    pixels = imread(shot)
    assert pixels.shape[0] >= 1600 and pixels.shape[1] >= 1200
    gray = pixels[..., :3].mean(axis=2)
    assert np.std(gray) > 0.05  # text, tables and figures: far from a blank page
    assert (gray < 0.5).mean() > 0.01  # dark ink covers more than 1% of the page
