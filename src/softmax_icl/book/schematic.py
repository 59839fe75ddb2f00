"""The Setting page's schematic (``book/figures/setting_window``): softmax attention's window on the sphere.

On the circle (d = 2) a query and a context of points; with ``M = w I`` each point's attention weight is the
Gaussian kernel ``exp(-(w/2) |x_i - x_q|^2)`` normalised over the context (the Nadaraya-Watson identity of the
Setting page), drawn as the area of the point's disc relative to the largest weight, for a wide window (small ``w``) and a narrow one (large ``w``),
with the weight against the angle to the query below. NumPy and the book's plotting style only: no trained unit.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

#: The two windows drawn, as the scale w of M = w I.
WINDOWS = (2.0, 30.0)
#: The context's angles (radians): fixed, uneven, so that the picture does not depend on a random draw.
ANGLES = np.array([0.12, 0.31, 0.55, 0.8, 1.02, 1.4, 1.77, 2.05, 2.5, 2.81, 3.2, 3.55, 3.9, 4.3, 4.62, 4.95, 5.3,
                   5.62, 5.95, 6.18])
QUERY = 0.95


def weights(w: float, angles: np.ndarray = ANGLES, query: float = QUERY) -> np.ndarray:
    """Softmax attention's weights with M = w I on the circle: exp(w cos(angle to the query)), normalised."""
    s = w * np.cos(angles - query)
    e = np.exp(s - s.max())
    return e / e.sum()


def setting_figure(path: Path) -> list[Path]:
    """Draw and save the schematic (PNG and PDF with the text-size metadata, :func:`softmax_icl.plotting.save`)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ..plotting import qualitative, save, use_style

    use_style()
    query_c, ctx_c = qualitative(2)
    fig = plt.figure(figsize=(6.4, 3.9))
    grid = fig.add_gridspec(2, 2, height_ratios=(2.2, 1.0))
    t = np.linspace(0, 2 * np.pi, 361)
    theta = np.linspace(-np.pi, np.pi, 361)
    for j, w in enumerate(WINDOWS):
        ax = fig.add_subplot(grid[0, j])
        a = weights(w)
        ax.plot(np.cos(t), np.sin(t), color="0.75", lw=1.0)
        ax.scatter(np.cos(ANGLES), np.sin(ANGLES), s=420 * a / a.max(), color=ctx_c, alpha=0.55, lw=0)
        ax.scatter(np.cos(ANGLES), np.sin(ANGLES), s=6, color="0.2", lw=0)
        ax.scatter([np.cos(QUERY)], [np.sin(QUERY)], marker="*", s=110, color=query_c, zorder=3)
        ax.annotate("query", (np.cos(QUERY), np.sin(QUERY)), xytext=(10, 10), textcoords="offset points")
        ax.set(title=f"{'wide' if j == 0 else 'narrow'} window: M = {w:g} I", aspect="equal", xlim=(-1.45, 1.45),
               ylim=(-1.3, 1.45))
        ax.axis("off")
        bx = fig.add_subplot(grid[1, j])
        k = np.exp(w * (np.cos(theta) - 1.0))
        bx.plot(np.degrees(theta), k, color=ctx_c)
        bx.set(xlabel="angle to the query (degrees)", ylabel="weight (relative)", xlim=(-180, 180), ylim=(0, 1.05))
        bx.set_xticks([-180, -90, 0, 90, 180])
    return save(fig, Path(path).parent, Path(path).name, show=False)
