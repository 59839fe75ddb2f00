"""The colours of the verdicts, defined once: the badges of every page, the landing page's overview figure and the
chapters' verdict boxes all take theirs from :data:`PALETTE`.

Each verdict has a fill and the colour of the text written on it; :func:`contrast` (WCAG 2.1's relative-luminance
formula) of the two is at least :data:`MIN_TEXT_CONTRAST`, the minimum for normal text (success criterion 1.4.3), so
a badge or a cell of the figure reads as well as the prose around it, in the light and the dark theme alike (a badge
brings its own background). The hues are muted (a claim that does not hold is a result, not an alarm) and differ in
lightness as well as in hue, and every badge and cell also carries its verdict in words, so no verdict is told by
colour alone.

The stylesheet's part (:func:`css`) is written into ``_static/book.css`` between :data:`CSS_BEGIN` and
:data:`CSS_END` by ``softmax-icl pages`` (:func:`css_text`); ``tests/test_book_pages.py`` holds the committed file
against it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from . import ledger as lg

#: The verdict of a claim whose statistic was still moving towards another verdict at the end of training (the
#: claims ledger's fifth category).
NOT_SETTLED = lg.NOT_SETTLED
#: Every verdict a page shows, in the order a legend lists them; ``None``: no record at that scale.
VERDICTS = (lg.REPRODUCED, lg.NOT_REPRODUCED, lg.INCONCLUSIVE, lg.DEPENDS, NOT_SETTLED, None)
#: The smallest contrast ratio of a verdict's text on its fill (WCAG 2.1, normal text).
MIN_TEXT_CONTRAST = 4.5


@dataclass(frozen=True)
class Colour:
    """A verdict's look: ``fill`` (a badge's background, a figure cell's face), ``text`` (written on the fill) and
    ``role`` (the sphinx-design badge role that marks it in MyST: ``{bdg-success}`...```)."""

    fill: str
    text: str
    role: str


#: The verdicts' colours. "reproduced" green, "not reproduced" slate, "inconclusive" a light gold (dark text),
#: "depends on a setting the sources leave open" blue, "not settled at this training length" purple, no record a
#: light grey.
PALETTE = {
    lg.REPRODUCED: Colour("#2e7d32", "#ffffff", "bdg-success"),
    lg.NOT_REPRODUCED: Colour("#59636e", "#ffffff", "bdg-secondary"),
    lg.INCONCLUSIVE: Colour("#f2c94c", "#212529", "bdg-warning-line"),
    lg.DEPENDS: Colour("#1565c0", "#ffffff", "bdg-info"),
    NOT_SETTLED: Colour("#7b3fa0", "#ffffff", "bdg-primary"),
    None: Colour("#f1f3f5", "#343a40", "bdg-light"),
}
#: The edge of a fill too close to the page's white to stand out alone (no record, inconclusive).
EDGE = "#868e96"
#: The border of a chapter's verdict box by what it holds: one verdict, or several ("mixed").
BOX = {"reproduced": PALETTE[lg.REPRODUCED].fill, "not": PALETTE[lg.NOT_REPRODUCED].fill, "mixed": "#495057"}

#: What sphinx-design writes for each badge role (the classes of its ``span``), by role.
_BADGE_CLASSES = {
    "bdg-success": "sd-bg-success", "bdg-secondary": "sd-bg-secondary", "bdg-warning-line": "sd-outline-warning",
    "bdg-info": "sd-bg-info", "bdg-primary": "sd-bg-primary", "bdg-light": "sd-bg-light",
}

CSS_BEGIN = "/* -- Verdict colours: generated from softmax_icl.book.palette by `softmax-icl pages`; do not edit. -- */"
CSS_END = "/* -- end of the verdict colours -- */"


def luminance(colour: str) -> float:
    """WCAG 2.1 relative luminance of ``#rrggbb``."""
    h = colour.lstrip("#")
    if not re.fullmatch(r"[0-9a-fA-F]{6}", h):
        raise ValueError(f"not a #rrggbb colour: {colour!r}")
    channels = []
    for k in (0, 2, 4):
        c = int(h[k:k + 2], 16) / 255
        channels.append(c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4)
    r, g, b = channels
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(a: str, b: str) -> float:
    """WCAG 2.1 contrast ratio of two colours, from 1 to 21."""
    hi, lo = sorted((luminance(a), luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def _rgb(colour: str) -> str:
    h = colour.lstrip("#")
    return ", ".join(str(int(h[k:k + 2], 16)) for k in (0, 2, 4))


def css() -> str:
    """The stylesheet's verdict rules: every badge role of :data:`PALETTE` filled with its verdict's colours (an
    outline role too, so every verdict reads alike), and the chapters' verdict boxes (:data:`BOX`)."""
    out = [CSS_BEGIN]
    for status, c in PALETTE.items():
        name = status or "no record"
        edge = EDGE if contrast(c.fill, "#ffffff") < 3 else c.fill
        out += [f"/* {name}: text contrast {contrast(c.fill, c.text):.2f}:1 */",
                f"span.sd-badge.{_BADGE_CLASSES[c.role]} {{",
                f"  background-color: {c.fill} !important;",
                f"  color: {c.text} !important;",
                f"  border: 1px solid {edge} !important;",
                "}"]
    for kind, colour in BOX.items():
        out += [f"div.admonition.verdict-{kind} {{ border-left-color: {colour}; }}",
                f"div.admonition.verdict-{kind} > .admonition-title "
                f"{{ background-color: rgba({_rgb(colour)}, 0.10); }}",
                f"div.admonition.verdict-{kind} > .admonition-title::after {{ color: {colour}; }}"]
    return "\n".join(out + [CSS_END])


def css_text(current: str) -> str:
    """``current`` (the stylesheet's text) with its verdict block replaced by :func:`css` (appended where it has
    none)."""
    block = re.compile(re.escape(CSS_BEGIN) + r".*?" + re.escape(CSS_END), re.S)
    if block.search(current):
        return block.sub(lambda _: css(), current)
    return current.rstrip("\n") + "\n\n" + css() + "\n"
