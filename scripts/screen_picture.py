"""A terminal screen as a grid of cells, and that grid drawn by headless Chromium into a PNG.

Why not Textual's own SVG export: it writes each run of text as one ``<text>`` with a ``textLength``, in
the fonts it names. A browser then draws Chinese with whatever font it finds and squeezes or stretches the
run to that length, so a CJK character is not two cells wide, characters overlap, and a missing font
shows boxes. Here every cell is placed on its own: its background a rectangle, its character a box one
cell wide (two for a wide character) at its column, scaled down when the font's glyph is wider. What a
font draws can no longer move anything else, so the picture keeps the terminal's grid in any browser.

The fonts are Debian's (``.ci/run`` installs them): DejaVu Sans Mono for text and box drawing, Noto Sans
Mono CJK for Chinese, DejaVu Sans and Symbola for the symbols the others lack (braille of the plots, the
header's ⭘). :func:`missing_glyphs` says which characters of a screen no installed font draws, so a
build refuses to publish boxes.

The PNG carries the screen's text in an ``iTXt`` chunk (:data:`TEXT_KEY`): what it shows can be read back
(:func:`png_text`) and compared without decoding pixels.
"""

from __future__ import annotations

import base64
import fcntl
import html
import json
import os
import select
import shutil
import struct
import subprocess
import tempfile
import time
import unicodedata
import zlib
from dataclasses import dataclass
from pathlib import Path

from rich.cells import get_character_cell_size
from rich.color import blend_rgb
from rich.style import Style
from rich.terminal_theme import SVG_EXPORT_THEME

# One cell, in CSS pixels: DejaVu Sans Mono's advance is 0.602 em, so at 16.6 px a glyph is one cell
# wide, and its box-drawing glyphs (1.164 em tall, 19.3 px) reach a little into the rows around: lines join.
CELL_W, CELL_H = 10, 19
FONT_PX = 16.6
# Drawn at twice the CSS size: sharp when a page scales the picture down, and when a reader opens it.
SCALE = 2
FONTS = ("DejaVu Sans Mono", "Noto Sans Mono CJK SC", "DejaVu Sans", "Symbola")
# The Debian packages that hold FONTS, named when a glyph is missing.
FONT_PACKAGES = "fonts-dejavu-core fonts-noto-cjk fonts-symbola"
TEXT_KEY = "workbench-screen"
CHROMIUM_NAMES = ("chromium", "chromium-browser")


@dataclass(frozen=True)
class Cell:
    """One cell of the screen: its character (a wide one fills this cell and the next), colours and weight."""

    char: str
    fg: str
    bg: str
    bold: bool = False
    italic: bool = False
    underline: bool = False
    strike: bool = False
    width: int = 1  # 2 for a wide (CJK) character; the cell after it is then None


@dataclass(frozen=True)
class Grid:
    """A screen: ``rows`` of ``width`` cells each, a wide character's second cell None."""

    width: int
    rows: tuple[tuple[Cell | None, ...], ...]

    @property
    def height(self) -> int:
        return len(self.rows)

    def text(self) -> str:
        """What the screen reads, a line per row (trailing spaces kept: a row is always ``width`` cells)."""
        return "\n".join("".join(cell.char for cell in row if cell is not None) for row in self.rows)

    def chars(self) -> set[str]:
        """Every character drawn (spaces aside)."""
        return {cell.char for row in self.rows for cell in row if cell is not None and not cell.char.isspace()}


def _hex(color) -> str:
    return "#{:02x}{:02x}{:02x}".format(*color)


def _colours(style: Style) -> tuple[str, str]:
    """The cell's foreground and background as CSS colours, as Rich's SVG export computes them."""
    theme = SVG_EXPORT_THEME
    fg = theme.foreground_color if style.color is None or style.color.is_default else style.color.get_truecolor(theme)
    bg = (theme.background_color if style.bgcolor is None or style.bgcolor.is_default
          else style.bgcolor.get_truecolor(theme))
    if style.reverse:
        fg, bg = bg, fg
    if style.dim:
        fg = blend_rgb(fg, bg, 0.4)
    return _hex(fg), _hex(bg)


def grid_of_lines(lines, width: int, height: int) -> Grid:
    """The grid of cells that ``lines`` (each an iterable of Rich segments: a rendered screen's rows) fill."""
    blank = Cell(" ", *_colours(Style()))
    rows = []
    for line in lines:
        row: list[Cell | None] = []
        for text, style, control in line:
            if control:
                continue
            style = style or Style()
            fg, bg = _colours(style)
            for char in text:
                size = get_character_cell_size(char)
                if size == 0:  # a combining mark joins the character before it (a wide one two cells back)
                    at = len(row) - 1 if row and row[-1] is not None else len(row) - 2
                    if at >= 0:
                        last = row[at]
                        row[at] = Cell(last.char + char, last.fg, last.bg, last.bold, last.italic, last.underline,
                                       last.strike, last.width)
                    continue
                row.append(Cell(char, fg, bg, bool(style.bold), bool(style.italic), bool(style.underline),
                                bool(style.strike), size))
                if size == 2:
                    row.append(None)
        if len(row) > width and row[width] is None:  # a wide character cut at the right edge
            row[width - 1] = blank
        rows.append(tuple(row[:width] + [blank] * (width - len(row))))
    rows += [tuple([blank] * width)] * (height - len(rows))
    return Grid(width, tuple(rows[:height]))


def grid_of_app(app) -> Grid:
    """The grid of what ``app`` (a running Textual app) shows now.

    The same render as Textual's ``App.export_screenshot``, through the same call to the screen's compositor
    (the full screen, the screens below a modal included), read as segments instead of printed to SVG.
    """
    width, height = app.size
    update = app.screen._compositor.render_update(full=True, screen_stack=app._background_screens)
    return grid_of_lines(([segment for strip in line for segment in strip] for line in update.strips),
                         width, height)


def to_html(grid: Grid, title: str = "") -> str:
    """A page that draws ``grid`` with every cell absolutely positioned, its glyph fitted to its cells."""
    styles: dict[str, int] = {}

    def cls(rule: str) -> str:
        return f"s{styles.setdefault(rule, len(styles))}"

    backgrounds, glyphs = [], []
    for y, row in enumerate(grid.rows):
        x = 0
        while x < grid.width:  # a run of one background is one rectangle
            cell = row[x] or row[x - 1]
            end = x + 1
            while end < grid.width and (row[end] or row[end - 1]).bg == cell.bg:
                end += 1
            backgrounds.append(f'<b class="{cls("background:" + cell.bg)}" style="left:{x * CELL_W}px;'
                               f'top:{y * CELL_H}px;width:{(end - x) * CELL_W}px"></b>')
            x = end
        for x, cell in enumerate(row):
            if cell is None or cell.char.isspace() and not (cell.underline or cell.strike):
                continue
            rule = f"color:{cell.fg}" + (";font-weight:bold" if cell.bold else "") + (
                ";font-style:italic" if cell.italic else "") + (
                ";text-decoration:" + " ".join(d for d, on in (("underline", cell.underline),
                                                                ("line-through", cell.strike)) if on)
                if cell.underline or cell.strike else "")
            glyphs.append(f'<i class="{cls(rule)}" data-w="{cell.width * CELL_W}" '
                          f'style="left:{x * CELL_W}px;top:{y * CELL_H}px">{html.escape(cell.char)}</i>')
    css = "\n".join(f".{name_of}{{{rule}}}" for rule, name_of in
                    ((rule, f"s{n}") for rule, n in styles.items()))
    families = ", ".join(f'"{f}"' for f in FONTS)
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>
html, body {{ margin: 0; background: {_hex(SVG_EXPORT_THEME.background_color)}; }}
#screen {{ position: relative; width: {grid.width * CELL_W}px; height: {grid.height * CELL_H}px; overflow: hidden;
  font-family: {families}; font-size: {FONT_PX}px; line-height: {CELL_H}px;
  font-kerning: none; font-variant-ligatures: none; -webkit-font-smoothing: antialiased; }}
#screen b {{ position: absolute; height: {CELL_H}px; }}
#screen i {{ position: absolute; height: {CELL_H}px; white-space: pre; font-style: normal;
  transform-origin: 0 50%; }}
{css}
</style></head>
<body><div id="screen">
{"".join(backgrounds)}
{"".join(glyphs)}
</div>
<script>
// Each glyph sits centred in its cells. One the font draws wider than its cells (a symbol from a fallback
// font) is scaled down, keeping its shape, to fit them: nothing overlaps its neighbour.
for (const glyph of document.querySelectorAll("#screen i")) {{
  const cells = Number(glyph.dataset.w), drawn = glyph.getBoundingClientRect().width;
  const fit = drawn > cells + 0.5 ? cells / drawn : 1;
  glyph.style.left = (parseFloat(glyph.style.left) + (fit < 1 ? 0 : (cells - drawn) / 2)) + "px";
  if (fit < 1) glyph.style.transform = `scale(${{fit}})`;
}}
document.documentElement.dataset.fitted = "yes";
</script></body></html>
"""


def chromium() -> str | None:
    """The path of Debian's chromium, or None."""
    return next((found for name in CHROMIUM_NAMES if (found := shutil.which(name))), None)


def _font_coverage() -> set[int] | None:
    """The code points some font of :data:`FONTS` draws (fontconfig's charsets), or None without fontconfig."""
    if shutil.which("fc-list") is None:
        return None
    covered: set[int] = set()
    for family in FONTS:
        done = subprocess.run(["fc-list", "--format", "%{charset}\n", family], capture_output=True, text=True,
                              timeout=60)
        for line in done.stdout.splitlines():
            for part in line.split():
                low, _, high = part.partition("-")
                covered.update(range(int(low, 16), int(high or low, 16) + 1))
    return covered


def missing_glyphs(chars: set[str]) -> list[str]:
    """The characters of ``chars`` that no installed font of :data:`FONTS` draws (each would be a box).

    Without fontconfig nothing can be checked, and every character is reported, so a build stops.
    """
    covered = _font_coverage()
    wanted = sorted(c for c in chars if unicodedata.category(c[0]) not in ("Zs", "Cc"))
    if covered is None:
        return wanted
    return [c for c in wanted if ord(c[0]) not in covered]


def _with_text(png: bytes, text: str) -> bytes:
    """``png`` with an ``iTXt`` chunk holding ``text`` (the screen's), placed before its IEND."""
    payload = TEXT_KEY.encode("latin-1") + b"\0\0\0\0\0" + text.encode("utf-8")  # uncompressed, no language
    chunk = struct.pack(">I", len(payload)) + b"iTXt" + payload
    chunk += struct.pack(">I", zlib.crc32(b"iTXt" + payload) & 0xFFFFFFFF)
    end = png.rindex(b"IEND") - 4
    return png[:end] + chunk + png[end:]


def png_text(png: bytes) -> str | None:
    """The screen text a picture of :func:`render` carries, or None."""
    at = 8
    while at < len(png):
        length, kind = struct.unpack(">I4s", png[at:at + 8])
        data = png[at + 8:at + 8 + length]
        head = TEXT_KEY.encode("latin-1") + b"\0\0\0\0\0"
        if kind == b"iTXt" and data.startswith(head):
            return data[len(head):].decode("utf-8")
        at += 12 + length
    return None


def png_pixels(png: bytes) -> bytes:
    """The picture's image data (its IDAT chunks), without the text chunk: what two renders must share."""
    at, data = 8, []
    while at < len(png):
        length, kind = struct.unpack(">I4s", png[at:at + 8])
        if kind in (b"IHDR", b"IDAT"):
            data.append(png[at + 8:at + 8 + length])
        at += 12 + length
    return b"".join(data)


class Chromium:
    """A headless Chromium driven over its DevTools pipe (file descriptors 3 and 4, NUL-separated JSON).

    One browser for many pictures: a launch costs seconds, a capture a fraction of one. A fresh profile
    in a temporary directory, no network, no GPU; pages are opened from files.
    """

    def __init__(self, browser: str | None = None, timeout: float = 120):
        browser = browser or chromium()
        if browser is None:
            raise RuntimeError("chromium is not installed (Debian: apt-get install chromium)")
        self.timeout = timeout
        self._profile = tempfile.mkdtemp(prefix="screen-picture-profile-")
        to_browser_r, self._to_browser_w = os.pipe()
        self._from_browser_r, from_browser_w = os.pipe()

        def wire():  # in the child: the pipe ends chromium expects as fds 3 and 4, kept open across exec
            # Copied above 3 and 4 first, so that neither end is overwritten by the other's move.
            read_end, write_end = fcntl.fcntl(to_browser_r, fcntl.F_DUPFD, 10), fcntl.fcntl(from_browser_w,
                                                                                           fcntl.F_DUPFD, 10)
            for end, fd in ((read_end, 3), (write_end, 4)):
                os.dup2(end, fd)
                os.set_inheritable(fd, True)

        self._process = subprocess.Popen(
            [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--hide-scrollbars", "--font-render-hinting=none", f"--user-data-dir={self._profile}",
             "--remote-debugging-pipe", "about:blank"],
            close_fds=False, preexec_fn=wire, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, env=dict(os.environ, DBUS_SESSION_BUS_ADDRESS="disabled:"))
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._pending, self._counter = b"", 0
        try:
            target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
            self._session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        except BaseException:
            self.close()
            raise

    def call(self, method: str, params: dict | None = None, *, page: bool = False) -> dict:
        """Send one DevTools command (to the page with ``page``) and return its result."""
        self._counter += 1
        message = {"id": self._counter, "method": method, "params": params or {}}
        if page:
            message["sessionId"] = self._session
        try:
            os.write(self._to_browser_w, json.dumps(message).encode() + b"\0")
        except BrokenPipeError:
            raise RuntimeError(f"chromium exited before {method} (exit {self._process.poll()})") from None
        deadline = time.monotonic() + self.timeout
        while True:
            while b"\0" not in self._pending:
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([self._from_browser_r], [], [], left)[0]:
                    raise RuntimeError(f"chromium did not answer {method} in {self.timeout:.0f} s")
                chunk = os.read(self._from_browser_r, 1 << 20)
                if not chunk:
                    raise RuntimeError("chromium closed its DevTools pipe")
                self._pending += chunk
            raw, self._pending = self._pending.split(b"\0", 1)
            reply = json.loads(raw)
            if reply.get("id") == self._counter:
                if "error" in reply:
                    raise RuntimeError(f"chromium refused {method}: {reply['error']}")
                return reply.get("result", {})

    def evaluate(self, expression: str):
        """The value of a JavaScript expression in the page (a promise's, once it settles)."""
        reply = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True},
                          page=True)
        return reply["result"].get("value")

    def open(self, url: str, width: int, height: int, scale: float = 1) -> None:
        """Show ``url`` in a viewport of ``width`` × ``height`` CSS pixels, once loaded and its fonts ready."""
        self.call("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": scale, "mobile": False}, page=True)
        self.call("Page.navigate", {"url": url}, page=True)
        deadline = time.monotonic() + self.timeout
        while self.evaluate("document.readyState === 'complete' && document.URL") != url:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{url} did not load in {self.timeout:.0f} s")
            time.sleep(0.05)
        self.evaluate("document.fonts.ready.then(() => true)")

    def capture(self, width: int | None = None, height: int | None = None) -> bytes:
        """A PNG of the viewport, or of its top-left ``width`` × ``height`` CSS pixels."""
        params: dict = {"format": "png"}
        if width and height:
            params |= {"clip": {"x": 0, "y": 0, "width": width, "height": height, "scale": 1},
                       "captureBeyondViewport": True}
        return base64.b64decode(self.call("Page.captureScreenshot", params, page=True)["data"])

    def close(self) -> None:
        try:
            self.call("Browser.close")
        except (RuntimeError, OSError):
            pass
        try:
            self._process.wait(10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        for fd in (self._to_browser_w, self._from_browser_r):
            try:
                os.close(fd)
            except OSError:
                pass
        shutil.rmtree(self._profile, ignore_errors=True)

    def __enter__(self) -> Chromium:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def render(grids: dict[str, Grid], out: Path, *, browser: str | None = None) -> list[Path]:
    """Draw each grid into ``out/NAME.png`` with one headless Chromium; returns the files written.

    Each page is written to a temporary file, opened from it and captured at the grid's size, times
    :data:`SCALE` pixels per CSS pixel.
    """
    written = []
    with tempfile.TemporaryDirectory(prefix="screen-picture-") as tmp, Chromium(browser) as browser_:
        for name, grid in grids.items():
            page = Path(tmp) / f"{name}.html"
            page.write_text(to_html(grid, name), encoding="utf-8")
            browser_.open(page.as_uri(), grid.width * CELL_W, grid.height * CELL_H, SCALE)
            target = out / f"{name}.png"
            target.write_bytes(_with_text(browser_.capture(), grid.text()))
            written.append(target)
    return written
