"""The landing page's overview figure (``book/figures/claims_overview``): every claim of the ledger at both scales,
grouped by paper, in the verdict palette; and the words and grouping the pages share with it."""

from __future__ import annotations

from pathlib import Path

from . import ledger as lg
from .palette import EDGE, NOT_SETTLED, PALETTE, contrast
from .verdicts import BookVerdicts

#: The short word of each status in a badge and in the overview figure's cells.
SHORT = {lg.REPRODUCED: "reproduced", lg.NOT_REPRODUCED: "not reproduced", lg.INCONCLUSIVE: "inconclusive",
         lg.DEPENDS: "depends on setting", NOT_SETTLED: "not settled", None: "no record"}

#: How each status reads on a page: the sphinx-design badge role of its colour (:data:`palette.PALETTE`).
BADGE = {status: c.role for status, c in PALETTE.items()}


def badge(status: str | None) -> str:
    """A status as a badge of the book's pages: its short word in its colour."""
    return f"{{{BADGE[status]}}}`{SHORT[status]}`"


def by_paper(book: BookVerdicts) -> list[tuple[str, list]]:
    """The ledger's entries grouped by paper, in the ledger's order of papers: (paper key, entry verdicts)."""
    return [(key, [ev for ev in book.entries if ev.entry.paper == key]) for key in book.ledger.papers
            if any(ev.entry.paper == key for ev in book.entries)]


def overview_figure(book: BookVerdicts, path: Path) -> list[Path]:
    """The landing page's figure: every claim of the ledger (rows, under its paper's name) at the default and the
    paper scale (columns), each cell filled with its verdict's colour (:data:`palette.PALETTE`) and naming it; as
    wide as the column and low enough to sit in the landing page's first screen; saved as PNG and PDF with the
    text-size metadata (:func:`softmax_icl.plotting.save`)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    from ..plotting import COLUMN_WIDTH_IN, SMALLEST_PT, save, use_style

    use_style()
    groups = by_paper(book)
    rows = []                                         # (kind, text, entry verdict or None)
    for key, evs in groups:
        rows.append(("paper", book.ledger.papers[key]["short"], None))
        rows += [("entry", ev.entry.label, ev) for ev in evs]
    row_in = 0.128
    fig, ax = plt.subplots(figsize=(COLUMN_WIDTH_IN, row_in * len(rows) + 0.08), layout="none")
    # the labels' column takes what the cells leave: two cells wide enough for their longest word
    cell_w, label_w = 0.215, 0.57
    ax.set_position((0, 0, 1, 1))
    ax.set_xlim(0, 1)
    ax.set_ylim(len(rows), 0)
    ax.axis("off")
    for i, (kind, text, ev) in enumerate(rows):
        y = i + 0.5
        if kind == "paper":
            ax.text(0.005, y + 0.16, text, ha="left", va="center", fontsize=SMALLEST_PT + 1, fontweight="bold")
            if i == 0:
                for j, scale in enumerate(("default scale", "paper scale")):
                    ax.text(label_w + (j + 0.5) * cell_w, y + 0.16, scale, ha="center", va="center",
                            fontsize=SMALLEST_PT + 1, fontweight="bold")
            continue
        ax.text(0.02, y, text, ha="left", va="center", fontsize=SMALLEST_PT)
        for j, v in enumerate((ev.default, ev.paper)):
            st = v.status if v is not None else None
            c = PALETTE[st]
            edge = EDGE if contrast(c.fill, "#ffffff") < 3 else c.fill
            x = label_w + j * cell_w
            ax.add_patch(Rectangle((x + 0.004, i + 0.06), cell_w - 0.008, 0.88, facecolor=c.fill, edgecolor=edge,
                                   linewidth=0.6))
            ax.text(x + cell_w / 2, y, SHORT[st], ha="center", va="center", fontsize=SMALLEST_PT, color=c.text)
    return save(fig, Path(path).parent, Path(path).stem, show=False)
