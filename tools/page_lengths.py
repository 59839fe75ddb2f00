"""Each chapter's length in screens and where its first figure sits, at 1400 and 800 px (900 px high), as a reader
opens it: the numbers the answer-first layout is judged by.

usage: python tools/page_lengths.py HTML_DIR     (HTML_DIR: a built book's ``_build/html``)

It opens the pages with the browser test's own Chromium setup and inspection (``tests/test_book_browser.py``) and
prints one Markdown row per chapter and width.
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
    chapters = sorted(p for p in tb.pages(html) if tb.page_kind(p.relative_to(html).as_posix()) == "chapter")
    gen = tb.browser.__wrapped__() if hasattr(tb.browser, "__wrapped__") else tb.browser()
    driver = next(gen)
    try:
        print("| chapter | width (px) | page length (screens of 900 px) | first figure from the top (px; screens) |")
        print("|---|---|---|---|")
        for width in tb.WIDTHS:
            tb.set_viewport(driver, width, tb.HEIGHT)
            for page in chapters:
                v = tb.visit(driver, html, page, width, None)
                first = v.seen.get("first_figure")
                top = f"{first['top']:.0f}; {first['top'] / tb.HEIGHT:.2f}" if first else "no figure"
                print(f"| {page.stem} | {width} | {v.seen['height'] / tb.HEIGHT:.1f} | {top} |")
    finally:
        gen.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
