"""The documentation site builds strictly, needs no network, its search works from the files, and it
shows the app as the app draws it now.

`just docs` runs the same build; CI runs `just docs` after the suite. The site's pictures of the app
are taken by the build (scripts/docs_shots.py, here on a tiny database instead of the demo's), never
committed. Where Debian's chromium is installed (`.ci/run` installs it), a real headless browser opens
the built site from the file system, with no flag that loosens file:// rules, and searches it.

The pages are held to what a reader can use (their sources' code blocks: tests/test_docs_code_blocks.py):
no line of code is wider than a page shows in a 1280 px window (scripts/console_layout.py's PAGE_WIDTH,
measured in Chromium), nor does any code block scroll sideways there; the sidebar's first entry is in
view, under nothing; and no page sends a reader to what only the project's authors have (its numbered
seeds and issues, the ``../shared`` folder beside the checkout).
"""

from __future__ import annotations

import difflib
import json
import os
import re
import subprocess
import sys
import time
from html.parser import HTMLParser
from pathlib import Path

import pytest
from rich.cells import cell_len

from conftest import load_script
from test_docs_code_blocks import PAGES
from test_docs_shots import CJK_QUESTION, build_tiny_demo

REPO = Path(__file__).resolve().parents[1]
MKDOCS = Path(sys.executable).with_name("mkdocs")
docs_shots = load_script("docs_shots")
console_layout = load_script("console_layout")
screen_picture = load_script("screen_picture")
CHROMIUM = screen_picture.chromium()
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (.ci/run installs it)")
# A picture an earlier build left behind, of a screen this build does not take: it must not reach the site.
STALE = "searchain.png"


@pytest.fixture(scope="module")
def shots(tmp_path_factory):
    """The pictures the build takes, as `just docs` does but of a tiny database: (their folder, the database).

    The folder already holds pictures of an earlier build: a picture of every screen that is not what the
    app draws, and one of a screen this database has none of. Without chromium the screens cannot be drawn:
    blank stand-ins let the rest of the site be checked, and the tests of the pictures are skipped.
    """
    root = tmp_path_factory.mktemp("docs-shots")
    db, folder = build_tiny_demo(root / "db"), root / "shots"
    folder.mkdir()
    for name in [*docs_shots.SHOTS, STALE.removesuffix(".png")]:
        (folder / f"{name}.png").write_bytes(b"\x89PNG\r\n\x1a\n an earlier build's picture")
    if CHROMIUM is None:
        assert docs_shots.main(["--db", str(db), "--out", str(folder), "--only", "figures"]) == 0
    else:
        assert docs_shots.main(["--db", str(db), "--out", str(folder)]) == 0
    return folder, db


@pytest.fixture(scope="module")
def site(tmp_path_factory, shots):
    """The site built by mkdocs --strict into a temp dir, with the pictures of ``shots``: (its directory, what
    the build printed)."""
    out = tmp_path_factory.mktemp("site")
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1", PYTHONWARNINGS="ignore", WORKBENCH_DOCS_SHOTS=str(shots[0]))
    done = subprocess.run([str(MKDOCS), "build", "--strict", "--site-dir", str(out)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stdout}{done.stderr}"
    return out, done.stdout + done.stderr


# The module's site: the pictures of the app drawn by chromium, then mkdocs' strict build (about 20 s together).
@pytest.mark.budget(30)
def test_the_strict_build_has_no_warning(site):
    _, printed = site
    assert not [line for line in printed.splitlines() if line.startswith(("WARNING", "ERROR"))], printed


def test_every_page_of_the_nav_is_built_and_indexed(site):
    out, _ = site
    index = json.loads((out / "search" / "search_index.json").read_text(encoding="utf-8"))
    located = {doc["location"].split("#")[0] for doc in index["docs"]}
    for page in ("index.html", "getting-started.html", "ledger.html", "tui.html", "analysis.html", "cli.html",
                 "evaluating.html", "claims.html", "retrieval.html", "judges.html", "formats.html"):
        assert (out / page).is_file(), page
        assert page in located, page
    # The search index is also inlined as a script, which a page opened from the file system can load.
    assert (out / "search" / "search_index.js").read_text(encoding="utf-8").startswith("var __index = ")


def test_the_analysis_api_page_is_generated_from_the_docstrings(site):
    out, _ = site
    html = (out / "analysis.html").read_text(encoding="utf-8")
    for name in ("datasets", "events", "ledger", "samples", "claims", "compare", "labels", "connect"):
        assert re.search(rf'id="workbench\.analysis\.\w+\.{name}"', html), f"{name} has no section"
    assert "One row per retrieval cell" in html or "one row per retrieval cell" in html
    assert ":func:" not in html and ":class:" not in html  # the Sphinx roles became code


# A line of a paragraph that starts as a Markdown list item does: "- ", "* ", "+ ", "1. " or "1) ". Python-Markdown
# only starts a list after a blank line, so a list written right under a paragraph line stays in the paragraph,
# its items run together. A dash inside a line of prose ("B − A", "a - b") is not at a line's start.
LIST_ITEM_LINE = re.compile(r"^[ \t]*(?:[-*+]|\d+[.)])[ \t]+\S", re.M)


class _Paragraphs(HTMLParser):
    """The text of each ``<p>`` of a page, inline code replaced by a placeholder word (code may hold dashes)."""

    def __init__(self):
        super().__init__()
        self.texts: list[str] = []
        self._open: list[str] | None = None
        self._code = 0

    def handle_starttag(self, tag, attrs):
        if tag == "p":
            self._open = []
        elif tag == "code" and self._open is not None:
            self._code += 1
            self._open.append("code")

    def handle_endtag(self, tag):
        if tag == "p" and self._open is not None:
            self.texts.append("".join(self._open))
            self._open = None
        elif tag == "code" and self._code:
            self._code -= 1

    def handle_data(self, data):
        if self._open is not None and not self._code:
            self._open.append(data)


def run_on_lists(html: str) -> list[str]:
    """The paragraphs of ``html`` that hold list items run together (a line that starts as a list item)."""
    paragraphs = _Paragraphs()
    paragraphs.feed(html)
    return [text for text in paragraphs.texts if LIST_ITEM_LINE.search(text)]


def test_run_on_lists_are_told_from_dashes_in_prose():
    assert run_on_lists("<p>Verifiers:\n- <code>lexical</code>: tokens;\n- <code>nli</code>: entailment.</p>")
    assert run_on_lists("<p>It does:\n1. creates the venv;\n2. imports.</p>")
    assert not run_on_lists("<p>Each cell shows B − A and its interval - or none\nwhen a run - the second - has no samples.</p>")
    assert not run_on_lists("<p>Run <code>workbench\n- x</code> once.</p>")      # a dash inside code is code
    assert not run_on_lists("<ul>\n<li>a proper list</li>\n</ul>")


def test_no_page_has_a_list_run_into_a_paragraph(site):
    out, _ = site
    found = {page.name: run_on_lists(page.read_text(encoding="utf-8")) for page in sorted(out.rglob("*.html"))}
    found = {name: [text.split("\n", 1)[0] for text in texts] for name, texts in found.items() if texts}
    assert not found, f"lists with no blank line before them (page: the line above each): {found}"


# Python-Markdown nests a list only under four spaces (a tab): an item indented two or three spaces, as GitHub
# accepts, renders as one more item of the outer list, its parent's sub-points flattened beside it.
SHALLOW_ITEM = re.compile(r"^ {1,3}(?:[-*+]|\d+[.)])[ \t]+\S")


def shallow_nested_items(markdown: str) -> list[int]:
    """The 1-based lines of ``markdown`` outside code fences that start a list item indented 1 to 3 spaces."""
    found, fence = [], None
    for number, line in enumerate(markdown.splitlines(), 1):
        stripped = line.lstrip()
        if stripped[:3] in ("```", "~~~"):
            fence = None if fence and stripped.startswith(fence) else (fence or stripped[:3])
        elif fence is None and SHALLOW_ITEM.match(line):
            found.append(number)
    return found


def test_shallow_nested_items_are_found_outside_code_only():
    assert shallow_nested_items("- a\n  - b\n   1. c\n    - d\n") == [2, 3]
    assert shallow_nested_items("```\n  - in code\n```\n- a\n") == []


def test_every_nested_list_is_indented_four_spaces():
    found = {page.name: shallow_nested_items(page.read_text(encoding="utf-8"))
             for page in sorted((REPO / "docs").rglob("*.md"))}
    found = {name: lines for name, lines in found.items() if lines}
    assert not found, f"nested list items indented less than 4 spaces render flat (page: lines): {found}"


def test_a_nested_list_renders_inside_its_item(site):
    out, _ = site
    html = (out / "design.html").read_text(encoding="utf-8")
    item = html.index("Generations go into a content-addressed cache")
    assert html.index("<ul>", item) < html.index("the model file", item) < html.index("</li>", item)


RESOURCE = re.compile(r'<(?:script|img|link|iframe)\b[^>]*\b(?:src|href)="(https?:)?//[^"]*"', re.I)


def test_no_page_loads_anything_from_the_network(site):
    out, _ = site
    for page in out.glob("*.html"):
        html = page.read_text(encoding="utf-8")
        # A link to click is fine; a script, a stylesheet, a font or a picture fetched is not.
        loaded = [m.group(0) for m in RESOURCE.finditer(html) if "<a " not in m.group(0)]
        assert not loaded, f"{page.name} loads {loaded}"
        assert "fonts.googleapis" not in html and "unpkg.com" not in html, page.name
    for picture in (out / "shots").glob("*.svg"):
        assert "cdnjs" not in picture.read_text(encoding="utf-8"), picture.name


def _search_in_chromium(url: str, timeout: float = 60.0) -> list[str]:
    """The result links a headless chromium shows for ``url`` (a page with ``?q=``)."""
    script = "JSON.stringify([...document.querySelectorAll('.md-search-result__item a')].map(a => a.href))"
    with screen_picture.Chromium(CHROMIUM) as browser:
        browser.call("Page.navigate", {"url": url}, page=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            links = json.loads(browser.evaluate(script) or "[]")
            if links:
                return links
            time.sleep(0.2)
    return []


@needs_chromium
def test_the_search_works_from_the_files(site):
    out, _ = site
    links = _search_in_chromium((out / "index.html").as_uri() + "?q=dissipation+quadrant")
    pages = {Path(link.split("?")[0].split("#")[0]).name for link in links}
    assert "tui.html" in pages, links


# -- the pictures of the app -------------------------------------------------------------------------------

def _what_it_shows(png: bytes) -> list[str]:
    """The screen text a picture carries, as lines (none for a picture that is not the app's)."""
    return (screen_picture.png_text(png) or "(not a picture of the app)").splitlines()


@needs_chromium
def test_the_sites_pictures_are_what_the_app_draws_now(site, shots, tmp_path):
    """Drawn again now from the same database, a screen and the figures are, byte for byte, what the site shows."""
    out, _ = site
    _folder, db = shots
    fresh = tmp_path / "now"
    assert docs_shots.main(["--db", str(db), "--out", str(fresh), "--only", "samples,figures"]) == 0
    assert sorted(p.name for p in fresh.iterdir()) == ["ledger-main.svg", "ledger-oracle.svg", "samples.png"]
    for name in ("samples.png", "ledger-main.svg", "ledger-oracle.svg"):
        shown, drawn = (out / "shots" / name).read_bytes(), (fresh / name).read_bytes()
        if name.endswith(".png"):
            diff = difflib.unified_diff(_what_it_shows(shown), _what_it_shows(drawn), "the site", "the app now",
                                        lineterm="")
            assert shown == drawn, f"{name} in the site is not what the app draws now:\n" + "\n".join(diff)
        assert shown == drawn, f"{name} in the site is not what the app draws now"


@needs_chromium
def test_each_picture_of_a_screen_is_the_whole_screen_it_names(shots):
    folder, _ = shots
    for name in ("samples.png", "detail.png"):
        png = (folder / name).read_bytes()
        assert png.startswith(b"\x89PNG\r\n\x1a\n"), name
        size = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
        assert size == (120 * screen_picture.CELL_W * screen_picture.SCALE,
                        40 * screen_picture.CELL_H * screen_picture.SCALE), name
    samples = screen_picture.png_text((folder / "samples.png").read_bytes())
    assert "Samples demo · cell k1-b128-linear" in samples and CJK_QUESTION in samples
    assert [cell_len(line) for line in samples.splitlines()] == [120] * 40    # the whole screen, cell by cell
    detail = screen_picture.png_text((folder / "detail.png").read_bytes())
    assert "Gold paths" in detail and "Marlene Dietrich" in detail     # the sample and its (imported) answer


@needs_chromium
def test_no_picture_of_an_earlier_build_reaches_the_site(site):
    out, _ = site
    pages = {page.name: page.read_text(encoding="utf-8") for page in out.glob("*.html")}
    shown = {src for html in pages.values() for src in re.findall(r'<img [^>]*src="shots/([^"]+)"', html)}
    assert {"ledger.png", "samples.png", "detail.png", "claims.png", "ledger-main.svg"} <= shown, shown
    for name in sorted(n for n in shown if n.endswith(".png")):
        text = screen_picture.png_text((out / "shots" / name).read_bytes())
        assert text and "Dissipation Workbench" in text, f"shots/{name} is not a picture this build took"
    assert not (out / "shots" / STALE).exists()       # a screen this build did not take is not shown stale


def test_every_picture_a_page_shows_is_one_the_build_takes():
    """A page may only show pictures scripts/docs_shots.py takes (the strict build fails on any other)."""
    taken = {f"{name}.png" for name in docs_shots.SHOTS if name != "figures"} | {
        f"{name}.svg" for name in docs_shots.FIGURES}
    for page in sorted((REPO / "docs").glob("*.md")):
        shown = set(re.findall(r"\]\(shots/([^)\s]+)", page.read_text(encoding="utf-8")))
        assert shown <= taken, f"{page.name} shows pictures no build takes: {sorted(shown - taken)}"


@needs_chromium
def test_the_landing_page_shows_the_install_command_before_any_scrolling(site):
    out, _ = site
    find = ("(() => { const code = [...document.querySelectorAll('pre code')]"
            ".find(c => c.textContent.includes('pip install rust-just'));"
            " if (!code) return null; const box = code.getBoundingClientRect(); return [box.top, box.bottom]; })()")
    with screen_picture.Chromium(CHROMIUM) as browser:
        browser.open((out / "index.html").as_uri(), 1280, 900)
        box = browser.evaluate(find)
    assert box is not None, "index.html shows no install command"
    assert 0 < box[0] and box[1] <= 900, f"the install command is at {box} px, below the 900 px a reader first sees"


# -- code blocks and what the pages point at -----------------------------------------------------------------

PAGE_WIDTH = console_layout.PAGE_WIDTH


class _Code(HTMLParser):
    """The text of each ``<pre>`` of a page, as it shows it."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.blocks: list[str] = []
        self._depth = 0

    def handle_starttag(self, tag, attrs):
        if tag == "pre":
            self._depth += 1
            if self._depth == 1:
                self.blocks.append("")

    def handle_endtag(self, tag):
        if tag == "pre" and self._depth:
            self._depth -= 1

    def handle_data(self, data):
        if self._depth:
            self.blocks[-1] += data


def test_no_code_line_of_the_built_site_is_wider_than_a_page(site):
    """Every page as built: what its sources (tests/test_docs_code_blocks.py) do not show too (included files,
    docstrings, indented code)."""
    out, _ = site
    found = {}
    for page in sorted(out.glob("*.html")):
        code = _Code()
        code.feed(page.read_text(encoding="utf-8"))
        wide = [line for block in code.blocks for line in block.splitlines()
                if console_layout.columns(line) > PAGE_WIDTH]
        if wide:
            found[page.name] = [f"{console_layout.columns(line)}: {line[:50]}" for line in wide]
    assert not found, f"code lines wider than {PAGE_WIDTH} columns: {found}"


# A 1280 px window with a classic (not overlay) scrollbar: 17 px of it are not the page's.
WINDOW = (1280 - 17, 900)
_MEASURE = """(() => {
  const blocks = [...document.querySelectorAll('.md-content pre > code')];
  const scrolls = blocks.filter(code => code.scrollWidth > code.clientWidth)
    .map(code => code.textContent.split('\\n').reduce((a, b) => (b.length > a.length ? b : a)).slice(0, 50));
  let fits = null;
  if (blocks.length) {            // a line of PAGE_WIDTH columns, in the first block's place and font
    const line = document.createElement('span');
    line.textContent = '\\n' + 'W'.repeat(%d);
    blocks[0].appendChild(line);
    fits = blocks[0].scrollWidth <= blocks[0].clientWidth;
    line.remove();
  }
  const wrap = document.querySelector('.md-sidebar--primary .md-sidebar__scrollwrap');
  const first = [...wrap.querySelectorAll('.md-nav__link')].find(link => link.getClientRects().length);
  const box = first.getBoundingClientRect(), view = wrap.getBoundingClientRect();
  const under = [box.top + 1, (box.top + box.bottom) / 2, box.bottom - 1]
    .map(y => document.elementFromPoint(box.left + 2, y)).filter(hit => !first.contains(hit))
    .map(hit => hit.className || hit.tagName);
  return {scrolls, fits, entry: first.textContent.trim(),
          inside: box.top >= view.top && box.bottom <= view.bottom, under};
})()""" % PAGE_WIDTH


def measured_in_chromium(out: Path) -> dict[str, dict]:
    """Each page of the site ``out`` as Chromium lays it out in :data:`WINDOW`: its code blocks that scroll
    sideways, whether a line of PAGE_WIDTH columns fits one, and the sidebar's first entry."""
    with screen_picture.Chromium(CHROMIUM) as browser:
        found = {}
        for page in sorted(out.glob("*.html")):
            if page.name != "404.html":
                browser.open(page.as_uri(), *WINDOW)
                found[page.name] = browser.evaluate(_MEASURE)
        return found


@pytest.fixture(scope="module")
def measured(site):
    return measured_in_chromium(site[0])


# The module's measure: every page opened in one Chromium (a fraction of a second each).
@pytest.mark.budget(20)
@needs_chromium
def test_no_code_block_scrolls_sideways_in_a_1280_px_window(measured):
    narrow = [name for name, page in measured.items() if page["fits"] is False]
    assert not narrow, f"pages whose code blocks scroll sideways for a line of {PAGE_WIDTH} columns: {narrow}"
    assert sum(page["fits"] is True for page in measured.values()) >= 15         # the pages that show code
    scrolling = {name: page["scrolls"] for name, page in measured.items() if page["scrolls"]}
    assert not scrolling, f"code blocks that scroll sideways (page: their widest lines): {scrolling}"


@needs_chromium
def test_the_sidebars_first_entry_is_in_view_and_under_nothing(measured):
    """Material keeps the sidebar's title sticky and scrolls the list to its page's entry: "Home" went under it."""
    hidden = {name: page for name, page in measured.items()
              if page["entry"] != "Home" or not page["inside"] or page["under"]}
    assert not hidden, f"pages whose sidebar hides its first entry: {hidden}"


# Where only the project's authors can follow: its numbered seed documents (seed 003), its issues (issue 16),
# the folder of full datasets beside the checkout (../shared). A bootstrap seed ("seed 0;") is not one.
UNREACHABLE = re.compile(r"\bseeds? 0\d+|\bissues? \d+|\.\./shared", re.I)


def test_the_unreachable_is_told_from_a_bootstrap_seed():
    assert UNREACHABLE.search("the vote of seed 003") and UNREACHABLE.search("before Issue 16")
    assert UNREACHABLE.search("workbench import ../shared/data/metaqa-dev")
    assert not UNREACHABLE.search("95% bootstrap CI, 2000 resamples, seed 0") and not UNREACHABLE.search("seed 0;")


def test_no_page_sends_a_reader_to_a_seed_an_issue_or_the_shared_folder(site):
    out, _ = site
    found = {page.name: UNREACHABLE.findall(page.read_text(encoding="utf-8")) for page in PAGES}
    # The built pages too: the API page is made of the package's docstrings.
    found |= {page.name: UNREACHABLE.findall(re.sub(r"<[^>]+>", "", page.read_text(encoding="utf-8")))
              for page in out.glob("*.html")}
    found = {name: sorted(set(hits)) for name, hits in found.items() if hits}
    assert not found, f"pages that point a reader at what they do not have: {found}"
