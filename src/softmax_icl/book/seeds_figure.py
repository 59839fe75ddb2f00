"""The seeds behind a chapter's verdicts, as a figure beside its claims: for every claim check decided on the seeds,
each trained unit's value, their mean and how far the mean can be trusted (its one-sided 95 % bound), on one axis.

Different checks measure different things, so the axis is the one they share: the distance of a value from the
check's threshold in units of its margin, signed so that the claim's side is to the right (a value at 1 clears the
threshold by one margin). A check over many cells shows its deciding cell (the one nearest its threshold); a check
over one or two cells (the classification basins) shows each, so that both basins are seen."""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import plotting, stats

#: A check over at most this many cells shows every cell; over more, the cell that decides it.
ALL_CELLS = 2
#: Colours of a cell by its verdict.
COLOURS = {"pass": "#2b8a3e", "fail": "#868e96"}
OTHER = "#b35900"
#: Where the axis may carry a tick (symmetric log: linear within one margin of the threshold).
TICKS = (-300, -100, -30, -10, -3, -1, 0, 1, 3, 10, 30, 100, 300)


def in_margins(cell: dict, value: float) -> float:
    """A value of ``cell`` as its distance from the threshold in margins, the claim's side positive (for an
    'equal' test, the claim's side is a small modulus)."""
    scale = float(cell.get("margin") or abs(cell["threshold"]) or 1.0)
    if cell["test"] == "above":
        return (value - cell["threshold"]) / scale
    if cell["test"] == "below":
        return (cell["threshold"] - value) / scale
    return (cell["threshold"] - abs(value)) / scale


def rows(claims: list[Any]) -> list[tuple[str, dict]]:
    """(label, cell) of every row: the claim checks decided on seeds (not exact), each with its shown cells."""
    out = []
    for c in claims:
        c = c if isinstance(c, dict) else vars(c)
        cells = [x for x in ((c.get("decision") or {}).get("cells") or []) if x.get("samples") and not x.get("exact")]
        if c.get("kind") != "claim" or not cells:
            continue
        shown = cells if len(cells) <= ALL_CELLS else [min(cells, key=stats.margin_over_threshold)]
        title = c.get("title") or c["id"].replace("-", " ")
        for cell in shown:
            out.append((title if len(shown) == 1 else f"{title}, {_cell_words(cell['label'])}", cell))
    return out


def _cell_words(label: str) -> str:
    """A cell's label in the figure's words: a training basin as its sign of β, arrows and relations typeset."""
    if "basin" in label:
        return "β > 0 basin" if "beta > 0" in label else "β ≤ 0 basin"
    return label.replace("->", "→").replace("<=", "≤").replace(">=", "≥").replace("beta", "β")


def seeds_figure(claims: list[Any]):
    """The figure (``None`` where no claim check is decided on seeds)."""
    import matplotlib.pyplot as plt
    from matplotlib.transforms import blended_transform_factory

    found = rows(claims)
    if not found:
        return None
    fig, axes = plotting.subplots(1, 1, row_height=0.5 + 0.32 * len(found))
    ax = axes[0, 0]
    rng = np.random.default_rng(0)
    label_at = blended_transform_factory(ax.transAxes, ax.transData)
    for i, (label, cell) in enumerate(reversed(found)):
        colour = COLOURS.get(cell.get("verdict"), OTHER)
        xs = np.array([in_margins(cell, v) for v in cell["samples"]])
        y = i - 0.14
        ax.scatter(xs, y + rng.uniform(-0.11, 0.11, len(xs)), s=9, color=colour, alpha=0.55, lw=0, zorder=2)
        mean = in_margins(cell, cell["mean"])
        bound = in_margins(cell, stats.worst_bound(cell)) if cell["test"] != "equal" else \
            (cell["threshold"] - stats.worst_bound(cell)) / float(cell.get("margin") or 1.0)
        ax.plot([bound, mean], [y, y], color="k", lw=2.2, solid_capstyle="butt", zorder=3)
        ax.plot([mean], [y], marker="D", ms=4.5, color="k", zorder=4)
        ax.text(0.01, i + 0.44, label, transform=label_at, va="top", ha="left", fontsize=plotting.SMALLEST_PT + 1,
                color="0.15", zorder=5, bbox=dict(facecolor="white", alpha=0.8, lw=0, pad=1.0))
    ax.axvline(0, color="k", lw=0.8, ls="--")
    ax.set_xscale("symlog", linthresh=1, linscale=0.6)
    lo, hi = ax.get_xlim()
    span = max(hi - lo, 1.0)
    ax.set_xlim(lo - 0.02 * span if lo < -1 else min(lo, -1.2), hi)
    lo, hi = ax.get_xlim()
    ticks = [t for t in TICKS if lo <= t <= hi]
    ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
    ax.xaxis.set_minor_locator(plt.NullLocator())
    ax.set_yticks([])
    ax.set_ylim(-0.5, len(found) - 0.5)
    for i in range(1, len(found)):
        ax.axhline(i - 0.5, color="0.88", lw=0.6, zorder=0)
    ax.set_xlabel("how far past what the claim needs (right: holds), in units of each check's tolerance")
    ax.grid(axis="y", visible=False)
    return fig
