"""The documentation site builds strictly, needs no network, and its search works from the files.

`just docs` runs the same build; CI runs `just docs` after the suite. Where Debian's chromium is
installed (`.ci/run` installs it), a real headless browser opens the built site from the file
system, with no flag that loosens file:// rules, and searches it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from html.parser import HTMLParser
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
MKDOCS = Path(sys.executable).with_name("mkdocs")


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The site built by mkdocs --strict into a temp dir: (its directory, what the build printed)."""
    out = tmp_path_factory.mktemp("site")
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1", PYTHONWARNINGS="ignore")
    done = subprocess.run([str(MKDOCS), "build", "--strict", "--site-dir", str(out)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stdout}{done.stderr}"
    return out, done.stdout + done.stderr


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
    """The result links a headless chromium shows for ``url`` (a page with ``?q=``), driven over
    its DevTools pipe (file descriptors 3 and 4, NUL-separated JSON messages)."""
    to_browser_r, to_browser_w = os.pipe()
    from_browser_r, from_browser_w = os.pipe()

    def wire():  # in the child: the pipe ends chromium expects as fds 3 and 4
        read_end, write_end = os.dup(to_browser_r), os.dup(from_browser_w)
        os.dup2(read_end, 3)
        os.dup2(write_end, 4)

    profile = Path(os.environ.get("TMPDIR", "/tmp")) / f"docs-chromium-{os.getpid()}"
    browser = subprocess.Popen(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--no-first-run", "--disable-sync", f"--user-data-dir={profile}",
         "--remote-debugging-pipe", "about:blank"],
        pass_fds=(3, 4), preexec_fn=wire, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    os.close(to_browser_r)
    os.close(from_browser_w)
    writer, reader = os.fdopen(to_browser_w, "wb", buffering=0), os.fdopen(from_browser_r, "rb", buffering=0)
    pending, counter = b"", 0

    def call(method, params=None, session=None):
        nonlocal pending, counter
        counter += 1
        message = {"id": counter, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        writer.write(json.dumps(message).encode() + b"\0")
        while True:
            while b"\0" not in pending:
                chunk = reader.read(65536)
                if not chunk:
                    raise RuntimeError("chromium closed its DevTools pipe")
                pending += chunk
            raw, pending = pending.split(b"\0", 1)
            reply = json.loads(raw)
            if reply.get("id") == counter:
                return reply

    try:
        target = call("Target.createTarget", {"url": url})["result"]["targetId"]
        session = call("Target.attachToTarget", {"targetId": target, "flatten": True})["result"]["sessionId"]
        script = "JSON.stringify([...document.querySelectorAll('.md-search-result__item a')].map(a => a.href))"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            reply = call("Runtime.evaluate", {"expression": script, "returnByValue": True}, session)
            links = json.loads(reply["result"]["result"].get("value") or "[]")
            if links:
                return links
            time.sleep(0.2)
        return []
    finally:
        try:
            call("Browser.close")
        except (RuntimeError, OSError):
            pass
        try:
            browser.wait(10)
        except subprocess.TimeoutExpired:
            browser.kill()
        shutil.rmtree(profile, ignore_errors=True)


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed here (.ci/run installs it)")
def test_the_search_works_from_the_files(site):
    out, _ = site
    links = _search_in_chromium((out / "index.html").as_uri() + "?q=dissipation+quadrant")
    pages = {Path(link.split("?")[0].split("#")[0]).name for link in links}
    assert "tui.html" in pages, links
