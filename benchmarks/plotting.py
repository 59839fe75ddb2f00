"""Saving a chapter figure, as a ratio measured in one run (no absolute target).

The old way (``savefig`` to PNG and to PDF, each with ``bbox_inches="tight"``, then the notebook's inline
rendering, also tight: each lays the figure out and measures every label again) over
:func:`softmax_icl.plotting.save` (the constrained layout run once and frozen, one bounding box for both files,
and the saved PNG shown instead of a third rendering), on a figure like the chapters' (six log-log panels with
legends and mathtext tick labels). Timings on a shared machine drift, so the two sides alternate and the median
ratio is reported with its interquartile range.

Usage:  python benchmarks/plotting.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import io
import statistics
import tempfile
import time
from pathlib import Path

import matplotlib

matplotlib.use("agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from softmax_icl.plotting import save, use_style  # noqa: E402


def timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def ratio_line(name: str, ratios: list[float]) -> str:
    q = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else [ratios[0]] * 3
    return f"{name:<44} {statistics.median(ratios):5.2f}x   (IQR {q[0]:.2f}-{q[2]:.2f}, {len(ratios)} rounds)"


def sample_figure() -> plt.Figure:
    """A figure like the chapters' (a grid of log-log panels with legends and mathtext tick labels)."""
    rng = np.random.default_rng(0)
    fig, axes = plt.subplots(2, 3, figsize=(14, 8))
    for ax in axes.flat:
        x = np.geomspace(1, 1e4, 200)
        for k in range(5):
            ax.plot(x, x ** (0.2 * k) * (1 + 0.05 * rng.standard_normal(200)), label=f"curve {k}")
        ax.set(xscale="log", yscale="log", xlabel="s = n L² / σ²", ylabel="w*", title="a panel")
        ax.legend(fontsize="xx-small")
    return fig


def figures(rounds: int) -> list[str]:
    use_style()
    ratios = []
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(rounds):
            fig = sample_figure()

            def old():
                for ext in ("png", "pdf"):
                    fig.savefig(Path(tmp) / f"old.{ext}", bbox_inches="tight")
                fig.savefig(io.BytesIO(), format="png", dpi=matplotlib.rcParams["figure.dpi"], bbox_inches="tight")

            t_old = timed(old)
            plt.close(fig)
            fig = sample_figure()
            ratios.append(t_old / timed(lambda: save(fig, Path(tmp), "new", show=False)))
            plt.close(fig)
    return [ratio_line("figures: old save + inline / plotting.save", ratios)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5, help="alternating rounds of the comparison")
    args = ap.parse_args()
    for line in figures(args.rounds):
        print(line)


if __name__ == "__main__":
    main()
