"""One plotting style for every figure, and saving each figure as PNG and PDF."""

from __future__ import annotations

from pathlib import Path

import matplotlib
import matplotlib.pyplot as plt
import seaborn as sns

#: Colours shared by all figures.
MODEL_COLORS = {"softmax": "#1f77b4", "linear": "#d62728", "oracle": "#555555", "gd": "#2ca02c",
                "kernel_gd": "#9467bd"}


def use_style() -> None:
    """The book's style: seaborn 'whitegrid', paper context, a colour-blind-safe palette."""
    sns.set_theme(context="paper", style="whitegrid", palette="colorblind", font_scale=1.1)
    matplotlib.rcParams.update({"figure.dpi": 110, "savefig.dpi": 150, "savefig.bbox": "tight",
                                "axes.titlesize": "medium", "legend.fontsize": "small",
                                "figure.constrained_layout.use": True})


def palette(n: int):
    return sns.color_palette("viridis", n)


def _inline() -> bool:
    """Whether figures are shown by Jupyter's inline backend (a notebook kernel)."""
    return "inline" in matplotlib.get_backend()


def save(fig: plt.Figure, directory: Path, name: str, show: bool = True) -> list[Path]:
    """Save ``fig`` as ``directory/name.png`` and ``.pdf``; returns the paths. In a notebook (inline backend) the
    saved PNG is shown in place of the figure and the figure is closed (with ``show``).

    The layout is computed once: the constrained layout is run, then frozen, and the tight bounding box is
    measured once for both files. Left to themselves, the two ``savefig`` calls and the notebook's own rendering
    would each lay the figure out and measure every label twice (see ``benchmarks/plotting.py``).
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    paths = [directory / f"{name}.{ext}" for ext in ("png", "pdf")]
    fig.draw_without_rendering()                     # runs the layout engine once
    fig.set_layout_engine("none")                    # ... and keeps its positions for both files
    bbox = fig.get_tightbbox(fig.canvas.get_renderer()).padded(matplotlib.rcParams["savefig.pad_inches"])
    for p in paths:
        # no creation date in PDFs, so re-running a notebook does not change unchanged figures
        fig.savefig(p, bbox_inches=bbox, metadata={"CreationDate": None} if p.suffix == ".pdf" else None)
    if show and _inline():
        from IPython.display import Image, display
        png = paths[0].read_bytes()
        width = int.from_bytes(png[16:20], "big")    # the PNG header's width, shown at the notebook's figure dpi
        display(Image(data=png, format="png",
                      width=round(width * matplotlib.rcParams["figure.dpi"] / matplotlib.rcParams["savefig.dpi"])))
        plt.close(fig)
    return paths
