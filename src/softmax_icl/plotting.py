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


def save(fig: plt.Figure, directory: Path, name: str) -> list[Path]:
    """Save ``fig`` as ``directory/name.png`` and ``.pdf``; returns the paths."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    paths = [directory / f"{name}.{ext}" for ext in ("png", "pdf")]
    for p in paths:
        # no creation date in PDFs, so re-running a notebook does not change unchanged figures
        fig.savefig(p, metadata={"CreationDate": None} if p.suffix == ".pdf" else None)
    return paths
