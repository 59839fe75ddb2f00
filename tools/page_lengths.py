"""Every page's length in screens and its visible words, at 1400 and 800 px (900 px high), as a reader opens it, and
for each chapter where its first figure and first quote sit and how many of its sentences use the machinery's words:
the numbers the book's proportions are judged by (the browser test holds the limits).

usage: python tools/page_lengths.py HTML_DIR     (HTML_DIR: a built book's ``_build/html``)

It opens the pages with the browser test's own Chromium setup and inspection (``tests/test_book_browser.py``) and
prints two Markdown tables: every page (the generated API reference and indexes apart), then every chapter.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import test_book_browser as tb  # noqa: E402


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1 or not Path(argv[0]).is_dir():
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    html = Path(argv[0]).resolve()
    everything = sorted(p for p in tb.pages(html) if not p.relative_to(html).as_posix().startswith("book/api")
                        and p.name not in ("genindex.html", "search.html", "py-modindex.html"))
    chapters = [p for p in everything if tb.page_kind(p.relative_to(html).as_posix()) == "chapter"]
    gen = tb.browser.__wrapped__() if hasattr(tb.browser, "__wrapped__") else tb.browser()
    driver = next(gen)
    try:
        rows = []
        print("| page | width (px) | screens of 900 px | visible words |")
        print("|---|---|---|---|")
        for width in tb.WIDTHS:
            tb.set_viewport(driver, width, tb.HEIGHT)
            for page in everything:
                v = tb.visit(driver, html, page, width, None)
                rel = page.relative_to(html).as_posix()
                print(f"| {rel} | {width} | {v.seen['height'] / tb.HEIGHT:.1f} | {v.seen.get('visible_words', 0)} |")
                if page in chapters:                  # opened again: visit() leaves it unfolded
                    driver.get(page.as_uri())
                    driver.execute_async_script(tb._INSPECT, tb.COLUMN, tb.FIRST_SCREEN_PX)
                    reading = driver.execute_script(tb._CHAPTER_READING, tb.COLUMN)
                    said = tb.sentences(reading["blocks"])
                    mach = sum(bool(tb.MACHINERY.search(s)) for s in said)
                    first = v.seen.get("first_figure")
                    quote = min(reading["quotes"]) / tb.HEIGHT if reading["quotes"] else float("nan")
                    rows.append(f"| {page.stem} | {width} | {first['top'] / tb.HEIGHT:.2f} | {quote:.1f} | "
                                f"{mach} of {len(said)} ({mach / max(len(said), 1):.0%}) | {len(reading['folded'])} |"
                                if first else f"| {page.stem} | {width} | no figure | {quote:.1f} | | |")
        print()
        print("| chapter | width (px) | first figure (screens) | first quote (screens) | sentences in the machinery's "
              "words | folded figures |")
        print("|---|---|---|---|---|---|")
        print("\n".join(rows))
    finally:
        gen.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
