"""Photograph every page of the built docs site in headless Chromium, as a reader at 1280 px sees it.

    .venv/bin/python scripts/docs_photos.py                    # site/ -> build/docs-photos/
    .venv/bin/python scripts/docs_photos.py --site /tmp/site --only index,tui --width 1280 --height 900

For looking at, after `just docs`: each page is written as NAME-01.png, NAME-02.png, … (the page cut into
screens of ``--height``; the first is what a reader sees before scrolling), and one line per page says what
a picture cannot: how many code blocks scroll sideways (and the first line of each), and how wide each
picture of the app is shown beside its own width.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Sequence

import screen_picture

ROOT = Path(__file__).resolve().parents[1]
MEASURE = """(() => {
  const scrolled = [...document.querySelectorAll('.md-content pre > code')]
    .filter(code => code.scrollWidth > code.clientWidth + 1)
    .map(code => code.textContent.split('\\n')[0].slice(0, 60));
  const shots = [...document.querySelectorAll('.md-content img')]
    .map(img => [img.getAttribute('src'), Math.round(img.getBoundingClientRect().width), img.naturalWidth]);
  return {height: document.documentElement.scrollHeight, blocks: document.querySelectorAll('.md-content pre').length,
          scrolled, shots};
})()"""


def photograph(site: Path, out: Path, names: Sequence[str], width: int, height: int) -> list[str]:
    """Write the screens of each page into ``out``; returns a line per page saying what was measured."""
    out.mkdir(parents=True, exist_ok=True)
    lines = []
    with screen_picture.Chromium() as browser:
        for name in names:
            browser.open((site / f"{name}.html").as_uri(), width, height)
            found = browser.evaluate(MEASURE)
            screens = max(1, -(-found["height"] // height))
            for n in range(screens):
                browser.evaluate(f"window.scrollTo(0, {n * height})")
                browser.evaluate("new Promise(requestAnimationFrame)")
                (out / f"{name}-{n + 1:02d}.png").write_bytes(browser.capture())
            shots = ", ".join(f"{src} at {shown} px ({natural} px)" for src, shown, natural in found["shots"])
            lines.append(f"{name}: {found['height']} px, {screens} screens, {found['blocks']} code blocks, "
                         f"{len(found['scrolled'])} scroll sideways {found['scrolled']}"
                         + (f"; pictures: {shots}" if shots else ""))
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--site", type=Path, default=ROOT / "site", help="the built site (default: %(default)s)")
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "docs-photos", help="default: %(default)s")
    parser.add_argument("--only", default="", help="comma-separated page names (default: every page)")
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--height", type=int, default=900)
    args = parser.parse_args(argv)
    if not (args.site / "index.html").is_file():
        print(f"docs_photos: no site in {args.site}: run `just docs` first", file=sys.stderr)
        return 2
    names = [n.strip() for n in args.only.split(",") if n.strip()] or sorted(
        p.stem for p in args.site.glob("*.html") if p.stem != "404")
    for line in photograph(args.site, args.out, names, args.width, args.height):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
